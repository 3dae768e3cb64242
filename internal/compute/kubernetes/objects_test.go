package kubernetes

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

func testProvider(t *testing.T, exp remote.Exporter) (*Provider, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset()
	// The apiserver gives every object a uid at create; the fake does not by itself, and the
	// provider deletes only with the uids it created things with.
	var uids atomic.Int64
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if m, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject()); err == nil && m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", uids.Add(1))))
		}
		return false, nil, nil
	})
	p, err := newProvider(testOptions(t, exp), clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	return p, cs
}

func TestJobObject_Hardened(t *testing.T) {
	p, _ := testProvider(t, &fakeExporter{})
	s := testSpec("01JABCDEFGHJKMNPQRSTVWXYZ0")
	env, err := splitEnv(s.Env)
	if err != nil {
		t.Fatal(err)
	}
	job := p.jobObject(jobInput{name: objectName(s.ID), id: s.ID, spec: s, env: env, mounts: testMounts()})

	if got := *job.Spec.BackoffLimit; got != 0 {
		t.Errorf("backoffLimit = %d, want 0", got)
	}
	if got := *job.Spec.ActiveDeadlineSeconds; got != 90 {
		t.Errorf("activeDeadlineSeconds = %d, want 90", got)
	}
	if got := *job.Spec.TTLSecondsAfterFinished; got != 600 {
		t.Errorf("ttlSecondsAfterFinished = %d, want 600", got)
	}
	pod := job.Spec.Template.Spec
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 0 {
		t.Errorf("pod: terminationGracePeriodSeconds %v, want 0: a cancel deletes the NetworkPolicy with the Job", g)
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever || *pod.AutomountServiceAccountToken || *pod.EnableServiceLinks {
		t.Errorf("pod: restartPolicy %q, automount %v, service links %v", pod.RestartPolicy, *pod.AutomountServiceAccountToken, *pod.EnableServiceLinks)
	}
	sc := pod.SecurityContext
	own := int64(compute.SandboxUIDFor(DefaultSandboxUID, s.ID))
	if !*sc.RunAsNonRoot || *sc.RunAsUser != own || *sc.RunAsGroup != own || *sc.FSGroup != own ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context = %+v", sc)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC || pod.RuntimeClassName != nil {
		t.Errorf("pod shares a host namespace or names a runtime class")
	}
	all := append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...)
	if len(all) != 2 {
		t.Fatalf("%d containers, want an init and a worker", len(all))
	}
	for _, c := range all {
		cs := c.SecurityContext
		if !*cs.ReadOnlyRootFilesystem || *cs.AllowPrivilegeEscalation || *cs.Privileged || !*cs.RunAsNonRoot ||
			len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL" || len(cs.Capabilities.Add) != 0 {
			t.Errorf("container %s security context = %+v", c.Name, cs)
		}
		if c.Resources.Requests.Cpu().String() != "500m" || c.Resources.Limits.Memory().String() != "256Mi" {
			t.Errorf("container %s resources = %+v, want requests = limits = 500m/256Mi", c.Name, c.Resources)
		}
		for _, e := range c.Env {
			// The dispatch id is no secret: it names the Job and labels every object.
			if e.Value != "" && e.Name != remote.GatewayURLEnv && e.Name != remote.StageEnv && e.Name != "PWD" && e.Name != remote.RlimitsEnv &&
				(e.Name != remote.DispatchEnv || c.Name != fetchContainer) {
				t.Errorf("container %s: env %s has a value in the Job (%q); values belong in the Secret", c.Name, e.Name, e.Value)
			}
		}
	}
	init, worker := pod.InitContainers[0], pod.Containers[0]
	if init.Image != testWorkerImage || strings.Join(init.Command, " ") != "/agora/bin/agora-worker worker fetch" {
		t.Errorf("init container: %s %q", init.Image, init.Command)
	}
	if worker.Image != testImage || strings.Join(worker.Command, " ") != "/agora/bin/agora-worker worker" || worker.WorkingDir != "/agora/workspace" {
		t.Errorf("worker container: %s %q in %q", worker.Image, worker.Command, worker.WorkingDir)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range worker.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for _, c := range []struct {
		path     string
		readOnly bool
		subPath  string
	}{
		{"/agora/bin", true, ""}, {"/tmp", false, ""}, {"/agora/bundle", true, ""}, {"/agora/workspace", false, ""},
		{"/agora/out", false, ""}, {"/agora/gateway", false, ""}, {"/etc/ssl/certs/ca-certificates.crt", true, remote.FileName},
	} {
		m, ok := mounts[c.path]
		if !ok || m.ReadOnly != c.readOnly || m.SubPath != c.subPath {
			t.Errorf("worker mount %s = %+v (present %v), want readOnly %v subPath %q", c.path, m, ok, c.readOnly, c.subPath)
		}
	}
	stage := map[string]bool{}
	for _, m := range init.VolumeMounts {
		stage[m.MountPath] = !m.ReadOnly
	}
	for _, want := range []string{"/agora/stage/bin", "/agora/stage/bundle", "/agora/stage/workspace", "/agora/stage/out", "/agora/stage/trust"} {
		if !stage[want] {
			t.Errorf("init container has no writable %s", want)
		}
	}
	for _, v := range pod.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
			t.Errorf("volume %s is not a sized emptyDir", v.Name)
		}
		if v.Name == tmpVolume && (v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit.Value() != 256<<20) {
			t.Errorf("/tmp volume = %+v, want memory of the spec's Scratch", v.EmptyDir)
		}
	}
}

func TestJobObject_RunAsAndRuntimeClass(t *testing.T) {
	opts := testOptions(t, &fakeExporter{})
	opts.RuntimeClass = "gvisor"
	opts.NodeSelector = map[string]string{"pool": "agents"}
	opts.Memory = ""
	p, err := newProvider(opts, clientsetAPI(fake.NewClientset()))
	if err != nil {
		t.Fatal(err)
	}
	s := testSpec("01JX")
	s.RunAs = &compute.HostUser{UID: 1879048192, GID: 1879048193}
	s.Limits.Timeout = 1500 * 1e6 // 1.5 s rounds up
	job := p.jobObject(jobInput{name: "agora-01jx", id: s.ID, spec: s, mounts: nil})
	pod := job.Spec.Template.Spec
	if *pod.SecurityContext.RunAsUser != 1879048192 || *pod.SecurityContext.RunAsGroup != 1879048193 || *pod.SecurityContext.FSGroup != 1879048193 {
		t.Errorf("run as = %+v", pod.SecurityContext)
	}
	if pod.RuntimeClassName == nil || *pod.RuntimeClassName != "gvisor" || pod.NodeSelector["pool"] != "agents" {
		t.Errorf("runtime class %v, node selector %v", pod.RuntimeClassName, pod.NodeSelector)
	}
	if got := *job.Spec.ActiveDeadlineSeconds; got != 2 {
		t.Errorf("activeDeadlineSeconds = %d, want 2", got)
	}
	if got := pod.Containers[0].Resources.Limits.Memory().Value(); got != 1<<30 {
		t.Errorf("memory limit = %d, want the spec's %d", got, 1<<30)
	}
	if p.isolation() != "kubernetes+restricted+readonly+nonroot+netpol+runtimeclass" {
		t.Errorf("isolation = %q", p.isolation())
	}
}

// The attack: read the token (or the proxy password) from anything but the Secret, as someone
// allowed to read Jobs, Pods and NetworkPolicies but not Secrets.
func TestObjects_TokenOnlyInSecret(t *testing.T) {
	p, _ := testProvider(t, &fakeExporter{})
	s := testSpec("01JABCDEFGHJKMNPQRSTVWXYZ0")
	env, _ := splitEnv(s.Env)
	const token = "agtok_0123456789secret"
	name := objectName(s.ID)
	job := p.jobObject(jobInput{name: name, id: s.ID, spec: s, env: env, mounts: testMounts()})
	np := networkPolicyObject("agents", name, s.ID, p.gateway)
	sec := secretObject("agents", name, s.ID, token, p.opts.GatewayCA, env)
	for what, obj := range map[string]any{"job": job, "network policy": np} {
		b, _ := json.Marshal(obj)
		for _, secret := range []string{token, "proxy-password-xyz"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds %q", what, secret)
			}
		}
	}
	if string(sec.Data[secretToken]) != token || string(sec.Data["env.AGORA_PROXY_TOKEN"]) != "proxy-password-xyz" || !*sec.Immutable {
		t.Errorf("secret data = %v, immutable %v", sec.Data, *sec.Immutable)
	}
}

func TestNetworkPolicyObject(t *testing.T) {
	p, _ := testProvider(t, &fakeExporter{})
	np := networkPolicyObject("agents", "agora-x", "X", p.gateway)
	b, _ := json.Marshal(np.Spec)
	want := `{"podSelector":{"matchLabels":{"agora.dispatch":"X","app.kubernetes.io/managed-by":"agora"}},` +
		`"egress":[{"ports":[{"protocol":"TCP","port":8443}],"to":[{"ipBlock":{"cidr":"10.250.0.1/32"}}]}],"policyTypes":["Ingress","Egress"]}`
	if string(b) != want {
		t.Errorf("network policy spec =\n%s\nwant\n%s", b, want)
	}
	gw6, err := parseGatewayURL("https://[fd00::1]:443")
	if err != nil {
		t.Fatal(err)
	}
	if cidr := networkPolicyObject("agents", "a", "X", gw6).Spec.Egress[0].To[0].IPBlock.CIDR; cidr != "fd00::1/128" {
		t.Errorf("IPv6 cidr = %q", cidr)
	}
}

func TestCheckMounts(t *testing.T) {
	for _, c := range []struct {
		name string
		m    remote.Mount
		ok   bool
	}{
		{"fine", remote.Mount{Name: "bundle", Dst: "/agora/bundle"}, true},
		{"reserved name", remote.Mount{Name: "bin", Dst: "/x"}, false},
		{"bad name", remote.Mount{Name: "../x", Dst: "/x"}, false},
		{"long name", remote.Mount{Name: strings.Repeat("a", 41), Dst: "/x"}, false},
		{"relative", remote.Mount{Name: "a", Dst: "x"}, false},
		{"unclean", remote.Mount{Name: "a", Dst: "/x/../etc"}, false},
		{"root", remote.Mount{Name: "a", Dst: "/"}, false},
		{"over bin", remote.Mount{Name: "a", Dst: "/agora/bin/agora-worker"}, false},
		{"over tmp", remote.Mount{Name: "a", Dst: "/tmp"}, false},
		{"above bin", remote.Mount{Name: "a", Dst: "/agora"}, false},
		{"file with sockets", remote.Mount{Name: "a", Dst: "/f", File: true, Sockets: []string{"s"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkMounts([]remote.Mount{c.m})
			if (err == nil) != c.ok {
				t.Errorf("checkMounts(%+v) = %v, want ok %v", c.m, err, c.ok)
			}
		})
	}
	if err := checkMounts([]remote.Mount{{Name: "a", Dst: "/a"}, {Name: "a", Dst: "/b"}}); err == nil {
		t.Error("a duplicate mount name was accepted")
	}
}
