package dispatch_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// realPodEdit is the agent's change, the same under bubblewrap and in the pod.
const realPodEdit = `printf 'hello\n' > greeting.txt
sed -i 's/one/uno/' README
rm gone.txt
echo edited`

// realPodProbe searches everything the pod can read for the model key and for the dispatch's
// gateway token: every regular file of its root and volumes (not /proc, /sys, /dev), then each
// process's environment and command line (but the worker's, pid 1, which is not dumpable; its
// environment held the token when it started). The needles are assembled at run time, so the
// probe's own text (its command line, the model's request, the transcript) does not hold them
// whole. Two canaries, assembled the same way, are things the pod does hold (/etc/passwd's
// nobody, the agent's AGORA_WORKSPACE): finding them shows the searches can find. A file
// search reads what grep printed, not xargs's status: xargs runs grep in batches and fails when
// any batch finds nothing, so its status misses a match among many files.
func realPodProbe(key, token string) string {
	return fmt.Sprintf(`k1=%s; k2=%s; t1=%s; t2=%s; n1=OPENAI_; n2=API_KEY
c1=nobody:x:; c2=65534; c3=AGORA_WORK; c4=SPACE=/agora
echo ENV-BEGIN; env | sort; echo ENV-END
echo "uid=$(id -u) gid=$(id -g)"
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -print 2>/dev/null > /tmp/files
echo "FILES-SCANNED $(wc -l < /tmp/files)"
xargs grep -lsF "$k1$k2" < /tmp/files > /tmp/hits; if [ -s /tmp/hits ]; then cat /tmp/hits; echo KEY-FOUND-FILE; fi
xargs grep -lsF "$t1$t2" < /tmp/files > /tmp/hits; if [ -s /tmp/hits ]; then cat /tmp/hits; echo TOKEN-FOUND-FILE; fi
xargs grep -lsF "$c1$c2" < /tmp/files > /tmp/hits; if [ -s /tmp/hits ]; then echo CANARY-FOUND-FILE; fi
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f" 2>/dev/null; done > /tmp/procs
echo "PROC-BYTES $(wc -c < /tmp/procs)"
if grep -qF "$k1$k2" /tmp/procs; then echo KEY-FOUND-PROC; else echo KEY-NOT-FOUND; fi
if grep -qF "$t1$t2" /tmp/procs; then echo TOKEN-FOUND-PROC; else echo TOKEN-NOT-FOUND; fi
if grep -qF "$c3$c4" /tmp/procs; then echo CANARY-FOUND-PROC; fi
if grep -qF "$n1$n2" /tmp/procs; then echo NAME-FOUND; else echo NAME-NOT-FOUND; fi
rm -f /tmp/procs /tmp/files /tmp/hits`, key[:10], key[10:], token[:len(token)/2], token[len(token)/2:])
}

// TestDispatch_RealPodSamePatchAsLocal: with a real kubelet,
// Debian's containerd, runc and the bridge CNI, an openai-runtime dispatch runs end to end in a
// pod (the init container `agora worker fetch` from the worker image downloads the bundle over
// the network gateway, the toolchain image runs the worker, the result is uploaded) and makes
// the same patch as under bubblewrap from the same commit. Its model calls go through the
// gateway's tunnel to a model API on this host, which refuses a request without the key: the
// key is added on the host, and it is in nothing the pod can read, in no Kubernetes object,
// and nowhere in the node's state.
func TestDispatch_RealPodSamePatchAsLocal(t *testing.T) {
	n := startPodNode(t)
	e := newModelEnv(t)
	e.addPodTarget(n)
	e.capability("shell", "tools: [run_command]\ncommands: [\"sh -c *\"]\n", nil)
	e.modelSubagent("editor", "openai", "shell")
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})

	var (
		patches [2]string
		probe   string
		objs    map[string][]byte // the namespace's objects while the pod runs
	)
	for i, target := range []string{"", "pod"} {
		steps := []openaitest.Step{openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", realPodEdit}}))}
		if target == "pod" {
			steps = append(steps,
				// The pod is waiting on this answer: its Secret and Job are there now, and
				// the Secret says which token to look for.
				openaitest.Func(func(req openaitest.Request) openaitest.Reply {
					var err error
					if objs, err = n.objectsJSON(t.Context()); err != nil {
						t.Error(err)
					}
					token := sessionToken(t, objs["secrets"])
					return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "run_command",
						Arguments: mustJSON(t, map[string]any{"argv": []string{"sh", "-c", realPodProbe(testAPIKey, token)}})}}}
				}),
				openaitest.Func(func(req openaitest.Request) openaitest.Reply {
					probe = lastToolResult(t, req)
					return openaitest.Reply{Content: "probed"}
				}))
		} else {
			steps = append(steps, openaitest.Say("edited"))
		}
		srv := e.model(testAPIKey, steps...)
		begin := time.Now()
		r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: target, Envs: []string{"model"}, Timeout: 4 * time.Minute})
		t.Logf("target %q: %s in %s, task %s, isolation %s", target, r.State, time.Since(begin).Round(time.Millisecond), r.ProviderTaskID, r.Isolation)
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("target %q: dispatch %s: %s %s: %s\ndispatch logs:\n%s\ngateway log:\n%s\npod logs:\n%s", target, r.ID, r.State, r.Reason, r.Detail,
				e.logs(r.ID), n.gwLog, n.podLogs(t))
		}
		// Every model call reached the model with the key, which only the host holds.
		if got := len(srv.Accepted()); got != len(steps) {
			t.Errorf("target %q: the model accepted %d requests, want %d", target, got, len(steps))
		}
		for j, req := range srv.Requests() {
			if req.Rejected != "" || req.Header.Get("Authorization") != "Bearer "+testAPIKey {
				t.Errorf("target %q: model request %d rejected %q; want accepted with the key", target, j, req.Rejected)
			}
		}
		if r.Result == nil || r.Result.Patch == nil {
			t.Fatalf("target %q: no patch", target)
		}
		patches[i] = e.blob(r.Result.Patch)
		for name, a := range map[string]*dispatch.Artifact{"stdout": r.Result.Stdout, "stderr": r.Result.Stderr, "transcript": r.Result.Transcript} {
			if a != nil && strings.Contains(e.blob(a), testAPIKey) {
				t.Errorf("target %q: stored %s holds the key", target, name)
			}
		}
		if target == "pod" {
			if !strings.HasPrefix(r.ProviderTaskID, "k8s:") {
				t.Errorf("task id %q, want k8s:<namespace>/<job>", r.ProviderTaskID)
			}
			// The pod writes its own emptyDirs, which no quota of the stage bounds.
			if !strings.HasSuffix(r.Isolation, "+disk-unenforced") || strings.Contains(r.Isolation, "disk-quota") {
				t.Errorf("isolation %q, want +disk-unenforced and no disk-quota: the pod's workspace is on no quota", r.Isolation)
			}
			checkGatewayPeers(t, n)
			n.logPodTimeline(t)
		}
	}
	if patches[0] != patches[1] {
		t.Errorf("patches differ:\nbubblewrap:\n%s\npod:\n%s", patches[0], patches[1])
	}
	for _, want := range []string{"+hello", "-one", "+uno", "gone.txt"} {
		if !strings.Contains(patches[1], want) {
			t.Errorf("the pod's patch lacks %q:\n%s", want, patches[1])
		}
	}
	t.Logf("the probe in the pod:\n%s", probe)
	checkProbe(t, probe)
	checkObjectsHoldNoKey(t, n, objs)
	checkNodeHoldsNoKey(t, n)
}

// checkProbe: the probe ran in the pod, not as root, read the pod's files and processes, and
// found neither the key nor its name, nor the gateway's token or its variable.
func checkProbe(t *testing.T, probe string) {
	t.Helper()
	for _, want := range []string{"ENV-BEGIN", "FILES-SCANNED", "KEY-NOT-FOUND", "TOKEN-NOT-FOUND", "NAME-NOT-FOUND", "CANARY-FOUND-FILE", "CANARY-FOUND-PROC", "exit code: 0"} {
		if !strings.Contains(probe, want) {
			t.Errorf("the probe's output lacks %q", want)
		}
	}
	for _, bad := range []string{testAPIKey, "KEY-FOUND-FILE", "KEY-FOUND-PROC", "TOKEN-FOUND-FILE", "TOKEN-FOUND-PROC", "OPENAI_API_KEY", remote.TokenEnv + "=", remote.CAEnv + "="} {
		if strings.Contains(probe, bad) {
			t.Errorf("the probe's output holds %q", bad)
		}
	}
	if strings.Contains(probe, "uid=0 ") || strings.Contains(probe, "gid=0\n") {
		t.Errorf("the agent ran as root in the pod")
	}
	var scanned int
	if i := strings.Index(probe, "FILES-SCANNED "); i >= 0 {
		fmt.Sscanf(probe[i+len("FILES-SCANNED "):], "%d", &scanned)
	}
	// The toolchain image alone has hundreds of files (busybox's links, git's helpers).
	if scanned < 100 {
		t.Errorf("the probe read %d files, want the pod's whole file system", scanned)
	}
}

// checkObjectsHoldNoKey looks where the pod's definition lives, as it was while the pod ran:
// the Job, pod, Secret, NetworkPolicy and event objects. The dispatch's Secret holds the
// session's token and the gateway's CA, and no key.
func checkObjectsHoldNoKey(t *testing.T, n *podNode, objs map[string][]byte) {
	t.Helper()
	if objs == nil {
		t.Fatal("no snapshot of the namespace's objects: the probe's answer never came")
	}
	for kind, raw := range objs {
		if bytes.Contains(raw, []byte(testAPIKey)) {
			t.Errorf("the %s in namespace %s hold the key", kind, n.c.Namespace)
		}
	}
	var secrets struct {
		Items []struct {
			Metadata struct{ Name string }
			Data     map[string][]byte
		}
	}
	if err := json.Unmarshal(objs["secrets"], &secrets); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 {
		t.Errorf("%d Secrets, want the dispatch's one", len(secrets.Items))
	}
	for _, s := range secrets.Items {
		var keys []string
		for k, v := range s.Data {
			keys = append(keys, k)
			if bytes.Contains(v, []byte(testAPIKey)) || bytes.Contains(v, []byte("OPENAI_API_KEY")) {
				t.Errorf("Secret %s key %s holds the model key", s.Metadata.Name, k)
			}
		}
		t.Logf("Secret %s holds %q", s.Metadata.Name, keys)
		if s.Data["token"] == nil || s.Data["ca.crt"] == nil {
			t.Errorf("Secret %s lacks the token or the CA: %q", s.Metadata.Name, keys)
		}
	}
	checkNetworkPolicy(t, n, objs["networkpolicies"])
}

// checkNodeHoldsNoKey searches every file of the node after the run: etcd's data,
// containerd's images, snapshots and container specs, the kubelet's pod volumes, the logs.
func checkNodeHoldsNoKey(t *testing.T, n *podNode) {
	t.Helper()
	hits, files := grepTree(t, n.c.Dir, []byte(testAPIKey))
	t.Logf("searched %d files of the node's state (%s) for the key", files, n.c.Dir)
	if len(hits) > 0 {
		t.Errorf("the node's state holds the key in %q", hits)
	}
	if files < 50 {
		t.Errorf("searched only %d files of the node's state", files)
	}
}

// checkNetworkPolicy: the dispatch's policy admits egress to the gateway alone. This test
// shows the object; its enforcement is internal/compute/kubernetes's TestRealNodeNetpol_*, on
// a node that runs kube-network-policies (the bridge CNI enforces none by itself).
func checkNetworkPolicy(t *testing.T, n *podNode, raw []byte) {
	t.Helper()
	t.Log("NOTE: this test checks the policy object, not its enforcement: the bridge CNI enforces no " +
		"NetworkPolicy by itself; the node's kube-network-policies does when scripts/netpol-tools.sh built it, " +
		"and internal/compute/kubernetes's TestRealNodeNetpol_* attack it there. Egress-only-to-the-gateway " +
		"holds only on a cluster whose network plugin enforces NetworkPolicy.")
	var pols struct {
		Items []struct {
			Spec struct {
				PolicyTypes []string
				Egress      []struct {
					To    []struct{ IPBlock *struct{ CIDR string } }
					Ports []struct{ Port int }
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &pols); err != nil {
		t.Fatal(err)
	}
	want := strings.TrimPrefix(n.gatewayURL, "https://"+k8stest.RealNodeIP+":")
	if len(pols.Items) != 1 || len(pols.Items[0].Spec.Egress) != 1 ||
		len(pols.Items[0].Spec.Egress[0].To) != 1 || pols.Items[0].Spec.Egress[0].To[0].IPBlock == nil ||
		pols.Items[0].Spec.Egress[0].To[0].IPBlock.CIDR != k8stest.RealNodeIP+"/32" ||
		len(pols.Items[0].Spec.Egress[0].Ports) != 1 || fmt.Sprint(pols.Items[0].Spec.Egress[0].Ports[0].Port) != want {
		t.Errorf("NetworkPolicy %s, want one policy with egress only to %s/32 port %s", raw, k8stest.RealNodeIP, want)
	}
}

// checkGatewayPeers: the gateway was reached, and only from the pod network: the bundle, the
// model calls' tunnel and the upload came over the bridge, not from a process on this host.
func checkGatewayPeers(t *testing.T, n *podNode) {
	t.Helper()
	pods := netip.MustParsePrefix(k8stest.RealNodePodSubnet)
	peers := n.peers.snapshot()
	t.Logf("gateway connections by peer: %v", peers)
	if len(peers) == 0 {
		t.Error("nothing connected to the gateway")
	}
	for h := range peers {
		if a, err := netip.ParseAddr(h); err != nil || !pods.Contains(a) {
			t.Errorf("the gateway was reached from %s, outside the pod network %s", h, pods)
		}
	}
	t.Logf("gateway log:\n%s", n.gwLog)
}

// sessionToken is the gateway token in the dispatch's Secret (the one Secret of the
// namespace), or a placeholder that fails the test when there is none.
func sessionToken(t *testing.T, secretsJSON []byte) string {
	var secrets struct {
		Items []struct{ Data map[string][]byte }
	}
	if err := json.Unmarshal(secretsJSON, &secrets); err != nil || len(secrets.Items) != 1 || len(secrets.Items[0].Data["token"]) < 16 {
		t.Errorf("want the dispatch's one Secret with a token, got %d Secrets (%v)", len(secrets.Items), err)
		return "no-token-in-the-secret"
	}
	return string(secrets.Items[0].Data["token"])
}
