package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/k8stest"
)

// These tests run against a real kube-apiserver, controller-manager (Job controller, garbage
// collector) and scheduler, with kwok playing the node: pods run no process, so an exit code
// comes from kwok's stages.
//
// Parallel tests: a few tests set their pods to end 45-90 s after they run (a pod must outlive
// the claims and attacks the test makes of it) and then mostly wait for kwok to end them. They
// call t.Parallel, so go test runs them together after the package's other tests and their
// waits overlap rather than add up. They share the cluster and nothing else: each has its own
// gateway, pool tag and dispatch ids, and the one that sweeps pools (AdoptFormerIdentity) takes
// the former home's only, which no other parallel test uses. A test that deletes or sweeps
// pools of a home another test uses stays serial.

var clusterIDs atomic.Int64

// clusterID is a dispatch id unique in the shared cluster.
func clusterID(prefix string) string {
	return fmt.Sprintf("%s%d%d", prefix, time.Now().UnixNano()%1e9, clusterIDs.Add(1))
}

func clusterProvider(t testing.TB, exp *fakeExporter) (*Provider, *k8stest.Cluster) {
	t.Helper()
	c := k8stest.Shared(t, k8stest.Options{})
	o := testOptions(t, exp)
	o.Kubeconfig, o.Namespace = c.Kubeconfig, c.Namespace
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	nodeSchedulable(t, p)
	return p, c
}

// nodeSchedulable waits until kwok's node has lost the not-ready taint: the shared cluster is
// handed out as soon as its namespace exists, and a loaded host takes a while to get there.
func nodeSchedulable(t testing.TB, p *Provider) {
	t.Helper()
	agoratest.Eventually(t, 2*time.Minute, "node "+k8stest.KwokNode+" untainted", func() error {
		n, err := p.client.CoreV1().Nodes().Get(t.Context(), k8stest.KwokNode, metav1.GetOptions{})
		if err == nil && len(n.Spec.Taints) > 0 {
			err = fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return err
	})
}

// failWith makes kwok end the pod's containers with code after delay.
func failWith(code int, delay string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) {
		m.Labels[k8stest.FailLabel] = "true"
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[k8stest.FailExitCodeAnnotation] = fmt.Sprint(code)
		m.Annotations[k8stest.FailDelayAnnotation] = delay
		m.Annotations[k8stest.FailJitterAnnotation] = delay
	}
}

func waitTimeout(t *testing.T, h compute.Handle, d time.Duration) compute.Exit {
	t.Helper()
	type res struct {
		e   compute.Exit
		err error
	}
	ch := make(chan res, 1)
	go func() { e, err := h.Wait(); ch <- res{e, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Wait: %v", r.err)
		}
		return r.e
	case <-time.After(d):
		t.Fatalf("Wait did not return in %v", d)
	}
	return compute.Exit{}
}

func TestCluster_RunsToCompletion(t *testing.T) {
	exp := &fakeExporter{}
	p, _ := clusterProvider(t, exp)
	id := clusterID("OK")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	// The attack: read the token as someone who may read Jobs and Pods but not Secrets.
	job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exit := waitTimeout(t, h, 3*time.Minute)
	if exit.Code != 0 || exit.Lost || exit.Cancelled || exit.TimedOut {
		t.Errorf("exit = %+v, want code 0", exit)
	}
	if exit.Isolation != "kubernetes+restricted+readonly+nonroot+netpol" {
		t.Errorf("isolation = %q", exit.Isolation)
	}
	pods, err := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of the dispatch: %d, %v", len(pods.Items), err)
	}
	for what, obj := range map[string]any{"job": job, "pod": pods.Items[0]} {
		b, _ := json.Marshal(obj)
		for _, secret := range append(exp.allTokens(), "proxy-password-xyz") {
			if strings.Contains(string(b), secret) {
				t.Errorf("the %s holds a secret value", what)
			}
		}
	}
	if n := exp.openSessions(); n != 0 {
		t.Errorf("%d gateway sessions open after Wait", n)
	}
	if _, err := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dispatch's secret outlived its end: %v", err)
	}
	np, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
	if err != nil || len(np.OwnerReferences) != 1 || np.OwnerReferences[0].UID != job.UID {
		t.Errorf("network policy owners = %+v, %v; want the job", np, err)
	}
}

func TestCluster_FailingStage(t *testing.T) {
	p, _ := clusterProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(3, "0s")
	h, err := p.Start(t.Context(), testSpec(clusterID("FAIL")))
	if err != nil {
		t.Fatal(err)
	}
	if exit := waitTimeout(t, h, 3*time.Minute); exit.Code != 3 || exit.Lost {
		t.Errorf("exit = %+v, want code 3", exit)
	}
}

func TestCluster_CancelDeletesForeground(t *testing.T) {
	exp := &fakeExporter{}
	p, _ := clusterProvider(t, exp)
	p.testOnlyPodMeta = failWith(1, "1h") // runs for an hour
	id := clusterID("CANCEL")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, p, id, corev1.PodRunning)
	// Another process cancels: a provider of its own, as `agora dispatch cancel` has.
	other, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Cancel(t.Context(), h.TaskID()); err != nil {
		t.Fatal(err)
	}
	if err := other.Cancel(t.Context(), h.TaskID()); err != nil {
		t.Errorf("second Cancel = %v, want nil", err)
	}
	exit := waitTimeout(t, h, 3*time.Minute)
	if !exit.Cancelled || exit.Lost {
		t.Errorf("exit = %+v, want Cancelled", exit)
	}
	if _, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("job still there after Wait: %v", err)
	}
	pods, _ := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left: foreground deletion removes them before the job", len(pods.Items))
	}
}

func TestCluster_StartTwiceAdopts(t *testing.T) {
	exp := &fakeExporter{}
	p, _ := clusterProvider(t, exp)
	p.testOnlyPodMeta = failWith(0, "3s")
	id := clusterID("ADOPT")
	h1, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	// A restarted supervisor: a new provider, the same dispatch.
	again, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := again.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	if h1.TaskID() != h2.TaskID() || exp.exports != 1 {
		t.Errorf("task ids %q, %q; %d exports; want one job and one export", h1.TaskID(), h2.TaskID(), exp.exports)
	}
	jobs, err := p.client.BatchV1().Jobs(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
	if err != nil || len(jobs.Items) != 1 {
		t.Errorf("%d jobs for the dispatch (%v), want 1", len(jobs.Items), err)
	}
	e1, e2 := waitTimeout(t, h1, 3*time.Minute), waitTimeout(t, h2, 3*time.Minute)
	if e1.Code != 0 || e2.Code != 0 || e1.Lost || e2.Lost {
		t.Errorf("exits = %+v, %+v; want code 0 from both", e1, e2)
	}
}

func TestCluster_DeletedBehindOurBackIsLost(t *testing.T) {
	p, _ := clusterProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("LOST")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, p, id, corev1.PodRunning)
	// kubectl delete job, by someone else.
	bg := metav1.DeletePropagationBackground
	if err := p.client.BatchV1().Jobs(p.ns).Delete(t.Context(), objectName(id), metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	if exit := waitTimeout(t, h, 3*time.Minute); !exit.Lost || exit.Cancelled {
		t.Errorf("exit = %+v, want Lost", exit)
	}
}

func TestCluster_SweepTerminalOnly(t *testing.T) {
	p, _ := clusterProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(1, "1h")
	done, live := clusterID("SWEPTDONE"), clusterID("SWEPTLIVE")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handles []compute.Handle
	for _, id := range []string{done, live} {
		h, err := p.Start(ctx, testSpec(id))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	// An orphan of a start that crashed before its Job: a NetworkPolicy and a Secret.
	orphan := clusterID("SWEPTORPHAN")
	if _, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Create(t.Context(),
		networkPolicyObject(p.ns, objectName(orphan), orphan, p.gateway), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.client.CoreV1().Secrets(p.ns).Create(t.Context(),
		secretObject(p.ns, objectName(orphan), orphan, "tok", p.opts.GatewayCA, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := p.Sweep(t.Context(), func(id string) bool { return id == done || id == orphan })
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2", n, err)
	}
	if exit := waitTimeout(t, handles[0], 3*time.Minute); !exit.Lost && !exit.Cancelled {
		t.Errorf("swept job's exit = %+v", exit)
	}
	if _, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), objectName(live), metav1.GetOptions{}); err != nil {
		t.Errorf("Sweep touched a live dispatch's job: %v", err)
	}
	for _, get := range []func() error{
		func() error {
			_, err := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), objectName(orphan), metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Get(t.Context(), objectName(orphan), metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("orphan left: %v", err)
		}
	}
	cancel()
	waitTimeout(t, handles[1], 3*time.Minute)
}

// The pod the provider builds is admitted where Pod Security "restricted" is enforced, and the
// same pod weakened one field at a time is refused: the check is live.
func TestCluster_PodSecurityRestricted(t *testing.T) {
	p, c := clusterProvider(t, &fakeExporter{})
	s := testSpec("01JPSA")
	env, _ := splitEnv(s.Env)
	job := p.jobObject(jobInput{name: "agora-psa", id: s.ID, spec: s, env: env, mounts: testMounts()})
	pod := func(edit func(*corev1.PodSpec)) error {
		spec := *job.Spec.Template.Spec.DeepCopy()
		edit(&spec)
		_, err := p.client.CoreV1().Pods(c.Namespace).Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-"}, Spec: spec}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := pod(func(*corev1.PodSpec) {}); err != nil {
		t.Fatalf("the provider's pod is refused: %v", err)
	}
	for name, edit := range map[string]func(*corev1.PodSpec){
		"privileged": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.Privileged = ptrTo(true)
			s.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
		},
		"escalation": func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptrTo(true) },
		"capability": func(s *corev1.PodSpec) { s.InitContainers[0].SecurityContext.Capabilities.Drop = nil },
		"root": func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsNonRoot = nil
			s.Containers[0].SecurityContext.RunAsNonRoot = ptrTo(false)
		},
		"no seccomp": func(s *corev1.PodSpec) {
			s.SecurityContext.SeccompProfile = nil
			s.Containers[0].SecurityContext.SeccompProfile = nil
		},
		"host network": func(s *corev1.PodSpec) { s.HostNetwork = true },
		"hostPath mount": func(s *corev1.PodSpec) {
			s.Volumes[0].EmptyDir = nil
			s.Volumes[0].HostPath = &corev1.HostPathVolumeSource{Path: "/"}
		},
	} {
		if err := pod(edit); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Errorf("%s: pod admitted or refused for another reason: %v", name, err)
		}
	}
}

// waitPodPhase waits until the dispatch's pod is in phase.
func waitPodPhase(t *testing.T, p *Provider, id string, phase corev1.PodPhase) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		pods, err := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
		if err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == phase {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pod of %s never reached %s", id, phase)
}
