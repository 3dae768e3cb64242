package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// The attack the pod's uid answers: RLIMIT_NPROC counts per uid on
// a node, so pods that share one starve each other. Each dispatch's pod runs as its own uid
// of the target's range, which Pod Security "restricted" allows (non-root); the spec's RunAs
// (a root agora's lease) wins.
func TestJobObject_OwnUIDPerDispatch(t *testing.T) {
	opts := testOptions(t, &fakeExporter{})
	opts.SandboxUID = 0x60000000
	p, err := newProvider(opts, clientsetAPI(fake.NewClientset()))
	if err != nil {
		t.Fatal(err)
	}
	podUID := func(s compute.Spec) (int64, int64, int64) {
		sc := p.jobObject(jobInput{name: objectName(s.ID), id: s.ID, spec: s}).Spec.Template.Spec.SecurityContext
		if !*sc.RunAsNonRoot {
			t.Errorf("dispatch %s: runAsNonRoot is off", s.ID)
		}
		return *sc.RunAsUser, *sc.RunAsGroup, *sc.FSGroup
	}
	seen := map[int64]string{}
	for _, id := range []string{"01JAAAAAAAAAAAAAAAAAAAAAAA", "01JAAAAAAAAAAAAAAAAAAAAAAB", "01JBBBBBBBBBBBBBBBBBBBBBBB"} {
		uid, gid, fsg := podUID(testSpec(id))
		first, last := compute.SandboxUIDRange(opts.SandboxUID)
		if uid != int64(compute.SandboxUIDFor(opts.SandboxUID, id)) || gid != uid || fsg != uid || uid < int64(first) || uid > int64(last) {
			t.Errorf("dispatch %s runs as %d:%d (fsGroup %d); want its own uid of [%d, %d]", id, uid, gid, fsg, first, last)
		}
		if other, ok := seen[uid]; ok {
			t.Errorf("dispatches %s and %s share uid %d", id, other, uid)
		}
		seen[uid] = id
	}
	s := testSpec("01JCCCCCCCCCCCCCCCCCCCCCCC")
	s.RunAs = &compute.HostUser{UID: 1879048300, GID: 1879048300}
	if uid, gid, _ := podUID(s); uid != 1879048300 || gid != 1879048300 {
		t.Errorf("with RunAs the pod runs as %d:%d, want the spec's 1879048300", uid, gid)
	}
	opts.SandboxUID = 1 << 31
	if _, err := newProvider(opts, clientsetAPI(fake.NewClientset())); err == nil || !strings.Contains(err.Error(), "sandbox_uid") {
		t.Errorf("sandbox_uid 2^31: %v, want refused", err)
	}
}

// The worker container carries the limits a pod cannot set, for the worker to apply to
// itself; nothing else can set them (the spec's environment is refused the name).
func TestJobObject_RlimitsEnv(t *testing.T) {
	p, _ := testProvider(t, &fakeExporter{})
	rlimits := func(s compute.Spec) string {
		pod := p.jobObject(jobInput{name: objectName(s.ID), id: s.ID, spec: s}).Spec.Template.Spec
		for _, e := range pod.InitContainers[0].Env {
			if e.Name == remote.RlimitsEnv {
				t.Errorf("the init container got %s", e.Name)
			}
		}
		return envValue(pod.Containers[0], remote.RlimitsEnv)
	}
	s := testSpec("01JDDDDDDDDDDDDDDDDDDDDDDD")
	if got := rlimits(s); got != "nproc=256,fsize=1073741824,nofile=4096" {
		t.Errorf("default limits: %s=%q", remote.RlimitsEnv, got)
	}
	s.Limits.MaxProcs, s.Limits.FileSize = 32, 4096
	got := rlimits(s)
	if got != "nproc=32,fsize=4096,nofile=4096" {
		t.Errorf("limits: %s=%q, want nproc=32,fsize=4096,nofile=4096", remote.RlimitsEnv, got)
	}
	if r, err := remote.ParseRlimits(got); err != nil || r.Nproc != 32 {
		t.Errorf("the worker cannot parse %q: %+v %v", got, r, err)
	}
	if _, err := splitEnv([]string{remote.RlimitsEnv + "=nproc=99999,fsize=1,nofile=1"}); err == nil {
		t.Errorf("the spec's environment set %s", remote.RlimitsEnv)
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
