package dispatch_test

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// learnAttackOn runs the learn attack as one exec dispatch on target (a docker container or
// a Kubernetes pod; e from netEnv with ca): the subagent's command is one its grant refuses,
// it clones from a host only egress.learn_hosts admits (git over HTTPS through the egress
// proxy: a GET and a POST with their paths), and in the same dispatch it reads agora.db and
// the audit key under the host's AGORA_HOME, lists AGORA_HOME, reaches a host outside
// learn_hosts (another name on another port, and the learn host's name on that port) and
// the learn host's address straight, around the proxy. Asserted: without learn the dispatch
// is refused and nothing ran; with learn it finishes marked learn, on target's provider
// (taskPrefix), its command a tool.would_deny, its requests net.would_deny with method and
// path, the learn host answered; every attack failed in the sandbox, the outside host saw no
// request and is on record as a net.connect refusal (never allowed, never would_deny), and no
// byte of the host's keys or database is in the output, logs or audit. It returns the learn
// dispatch.
func learnAttackOn(t *testing.T, e *env, ca *testCA, target, taskPrefix string) *dispatch.Record {
	t.Helper()
	var mu sync.Mutex
	var learnSeen []string
	git := gitServer(t, nil)
	learnPort := ca.serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		learnSeen = append(learnSeen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		git.ServeHTTP(w, r)
	}))
	var otherHits atomic.Int64
	otherPort := ca.serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		w.Write([]byte("LEAKED"))
	}))
	e.d.Config.Egress.LearnHosts = []string{"git.test:" + learnPort}
	home := e.home.Dir
	try := func(name, cmd string) string { return cmd + "; echo \"" + name + "=$?\"" }
	e.learnSubagent("learner", strings.Join([]string{
		"git clone -q https://git.test:" + learnPort + "/repo.git /tmp/c && cat /tmp/c/README",
		try("db", "cat "+home+"/agora.db"),
		try("key", "cat "+home+"/keys/audit.key"),
		try("home", "ls "+home),
		try("other", "git ls-remote https://api.test:"+otherPort+"/repo.git"),
		try("otherport", "git ls-remote https://git.test:"+otherPort+"/repo.git"),
		// Around the proxy: no proxy variables, the learn host's address and port.
		try("direct", "env -u HTTPS_PROXY -u https_proxy -u ALL_PROXY -u all_proxy git -c http.lowSpeedTime=5 -c http.lowSpeedLimit=1 ls-remote https://"+upstreamAddr+":"+learnPort+"/repo.git"),
	}, "; "))
	req := dispatch.Request{Subagent: "learner", Target: target, Timeout: 3 * time.Minute}

	refused := e.run(req)
	if refused.State != lifecycle.DispatchFailed || refused.Reason != lifecycle.ReasonDenied || refused.Learn || refused.StartedAt != nil {
		t.Fatalf("%s without learn: %s/%s learn=%v started=%v, want failed/denied, never started", target, refused.State, refused.Reason, refused.Learn, refused.StartedAt)
	}
	mu.Lock()
	if len(learnSeen) != 0 {
		t.Fatalf("%s: the refused dispatch reached the learn host: %q", target, learnSeen)
	}
	mu.Unlock()

	req.Learn = true
	r := e.run(req)
	out := e.stdout(r)
	t.Logf("%s learn dispatch %s (task %s, isolation %s):\n%s", target, r.ID, r.ProviderTaskID, r.Isolation, out)
	if r.State != lifecycle.DispatchFinished || !r.Learn {
		t.Fatalf("%s learn: %s/%s %s learn=%v\n%s\n%s", target, r.State, r.Reason, r.Detail, r.Learn, out, e.logs(r.ID))
	}
	if !strings.HasPrefix(r.ProviderTaskID, taskPrefix) {
		t.Fatalf("%s: task %q, want %s...: the dispatch did not run on the target's provider", target, r.ProviderTaskID, taskPrefix)
	}
	if !strings.Contains(out, "hello from upstream") {
		t.Errorf("%s: the clone from the learn host did not work:\n%s\n%s", target, out, e.logs(r.ID))
	}
	for _, name := range []string{"db", "key", "home", "other", "otherport", "direct"} {
		if !strings.Contains(out, name+"=") {
			t.Errorf("%s: the attack %s did not run:\n%s", target, name, out)
		} else if strings.Contains(out, name+"=0") {
			t.Errorf("%s: the attack %s succeeded:\n%s", target, name, out)
		}
	}
	if strings.Contains(out, "LEAKED") || otherHits.Load() != 0 {
		t.Errorf("%s: the host outside learn_hosts answered (%d requests):\n%s", target, otherHits.Load(), out)
	}
	mu.Lock()
	seen := strings.Join(learnSeen, "\n")
	mu.Unlock()
	if !strings.Contains(seen, "GET /repo.git/info/refs") || !strings.Contains(seen, "POST /repo.git/git-upload-pack") {
		t.Errorf("%s: the learn host saw %q, want the clone's GET and POST", target, seen)
	}

	var mine []string
	for _, l := range strings.Split(e.auditDump(), "\n") {
		if strings.Contains(l, `"subject":"dispatch/`+r.ID+`"`) {
			mine = append(mine, l)
		}
	}
	all := strings.Join(mine, "\n")
	for _, want := range []string{
		`"kind":"tool.would_deny"`, `"command":"sh -c 'git clone`, `"tool":"exec"`,
		`"kind":"net.would_deny"`, `"method":"GET"`, `"path":"/repo.git/info/refs"`,
		`"method":"POST"`, `"path":"/repo.git/git-upload-pack"`, `"learn":true`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("%s: the learn dispatch's audit lacks %s:\n%s", target, want, all)
		}
	}
	for _, l := range mine {
		if strings.Contains(l, `"port":`+otherPort) && (strings.Contains(l, `"decision":"allow"`) || strings.Contains(l, "would_deny")) {
			t.Errorf("%s: the host outside learn_hosts was recorded as reached: %s", target, l)
		}
	}
	wantOutsideRefused(t, detailsOf(e.audited(r, entry.NetConnect)), otherPort)
	secrets := hostSecrets(t, home)
	wantNoHostBytes(t, secrets, "the dispatch's output and logs", out+e.logs(r.ID))
	wantNoHostBytes(t, secrets, "the audit log", e.auditDump())
	return r
}

// TestLearn_DockerAttack: learn on a docker target, on podman: the learn attack
// bubblewrap runs (learnAttackOn) as one dispatch in a container. Learn is the host's work
// (the command's would_deny at accept, the egress proxy, the gateway) and the container is
// the same container: nothing of it is bubblewrap's. Failed before: nothing had run learn
// off bubblewrap.
func TestLearn_DockerAttack(t *testing.T) {
	image := requireContainer(t)
	ca := newTestCA(t)
	e := netEnv(t, ca)
	e.addDockerTarget(image)
	r := learnAttackOn(t, e, ca, "box", "docker:")
	if !strings.HasPrefix(r.Isolation, "docker+") {
		t.Errorf("isolation %q, want a container's", r.Isolation)
	}
}

// TestLearn_DockerWarmSlotAttack: the same attack claimed in a docker warm slot. The
// first learn dispatch starts cold and teaches the target its shape; the second claims the
// slot that is then ready, and the attack finds exactly what it found cold: a learn dispatch
// is told apart at claim by nothing but what the host holds (its proxy, its gateway), and the
// slot was started before the dispatch was known.
func TestLearn_DockerWarmSlotAttack(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	ca := newTestCA(t)
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix(upstreamAddr + "/32")}}
	e.d.Resolver = testResolver{}
	e.d.EgressRoots = ca.pem
	cold := learnAttackOn(t, e, ca, "box", "docker:")
	waitReady(t, w)
	hot := learnAttackOn(t, e, ca, "box", "docker:")
	if c := boxCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want the first learn dispatch cold and the second claimed in the slot", c)
	}
	if cold.Isolation != hot.Isolation {
		t.Errorf("isolation: cold %q, warm %q", cold.Isolation, hot.Isolation)
	}
}

// TestLearn_RealPodAttack: the same attack as one dispatch in a pod on the real kubelet
// (containerd, runc; AGORA_K8S_REAL_NODE=1): the worker runs in remote mode, its egress
// proxy and gateway reached through the network gateway's tunnels. Failed before: the worker
// of an exec learn dispatch in a pod claimed a model gateway its session did not have, and the
// dispatch ended worker-failed.
func TestLearn_RealPodAttack(t *testing.T) {
	n := startPodNode(t)
	ca := newTestCA(t)
	e := netEnv(t, ca)
	e.addPodTarget(n)
	learnAttackOn(t, e, ca, "pod", "k8s:")
}
