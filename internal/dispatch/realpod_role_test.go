package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// roleExample is the file docs/providers-k8s.md tells people to apply for agora's service
// account (the docs show the same text; TestDocs_RoleIsTheExampleFile keeps them one).
const roleExample = "../../examples/kubernetes/rbac.yaml"

// TestDispatch_RealPodDocumentedRole: the documented least-privilege
// Role is applied from the file people are told to apply, and the provider authenticates as
// the ServiceAccount bound to it and nothing else. Every provider action works on a real
// node: a dispatch runs to its end, describe reads its placement, a restarted supervisor
// adopts a running Job, a cancel stops the pod (its agent's process is gone from the node),
// and Sweep removes what an ended dispatch left. Before the fix the cancel was refused
// (it read the NetworkPolicy with get, which the Role does not grant) and the pod ran on.
func TestDispatch_RealPodDocumentedRole(t *testing.T) {
	n := startPodNode(t)
	ctx := t.Context()
	docs, err := os.ReadFile(roleExample)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.c.ApplyYAML(ctx, docs); err != nil {
		t.Fatalf("apply %s: %v", roleExample, err)
	}
	kubeconfig, err := n.c.ServiceAccountKubeconfig(ctx, "agora")
	if err != nil {
		t.Fatal(err)
	}
	confined(t, n, kubeconfig)
	e := newEnv(t)
	e.addPodTargetAs(n, kubeconfig)

	var done *dispatch.Record
	t.Run("dispatch", func(t *testing.T) {
		e.subagent("writer", `echo writing; printf 'role\n' > role.txt`)
		done = e.run(dispatch.Request{Subagent: "writer", Target: "pod", Timeout: 3 * time.Minute})
		if done.State != lifecycle.DispatchFinished {
			t.Fatalf("dispatch %s: %s %s: %s\npod logs:\n%s", done.ID, done.State, done.Reason, done.Detail, n.podLogs(t))
		}
		if done.Result == nil || done.Result.Patch == nil || !strings.Contains(e.blob(done.Result.Patch), "+role") {
			t.Errorf("the dispatch's patch lacks the agent's file")
		}
	})
	if done == nil || done.State != lifecycle.DispatchFinished {
		t.FailNow()
	}

	t.Run("describe", func(t *testing.T) {
		pl, err := e.d.Placement(ctx, done)
		if err != nil || pl == nil {
			t.Fatalf("placement as the Role: %+v, %v", pl, err)
		}
		if pl.Gone || pl.Phase != "Succeeded" || pl.Node != k8stest.RealNodeName {
			t.Errorf("placement %+v, want the finished pod on %s", pl, k8stest.RealNodeName)
		}
	})

	t.Run("adopt-and-cancel", func(t *testing.T) {
		e.subagent("sleeper", `echo started; sleep 300`)
		r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "sleeper", Target: "pod", Timeout: 4 * time.Minute, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan *dispatch.Record, 1)
		go func() {
			rec, _ := e.d.Supervise(ctx, r.ID, nil)
			ended <- rec
		}()
		n.waitWorkerRunning(t)
		if !agoratest.Poll(2*time.Minute, func() bool { return n.sleepRunning(t) }) {
			t.Fatalf("no sleep among the node's processes within 2 minutes:\n%s", n.ps(t))
		}
		live, err := e.d.Records.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		// A restarted supervisor: a provider of its own, the same Role, the same dispatch.
		again, err := kubernetes.New(kubernetes.Options{Kubeconfig: kubeconfig, Namespace: n.c.Namespace,
			Image: n.toolchain, WorkerImage: n.workerRef, GatewayURL: n.gatewayURL, GatewayCA: n.ca,
			Exporter: exportOnly{n.reg}, Target: "pod"})
		if err != nil {
			t.Fatal(err)
		}
		adopted, err := again.Start(ctx, compute.Spec{ID: r.ID, Argv: []string{"/agora/bin/agora-worker", "worker"}})
		if err != nil {
			t.Fatalf("adopt as the Role: %v", err)
		}
		if adopted.TaskID() != live.ProviderTaskID {
			t.Errorf("adopted %q, the dispatch runs %q", adopted.TaskID(), live.ProviderTaskID)
		}
		if _, err := e.d.Cancel(ctx, r.ID); err != nil {
			t.Fatalf("cancel as the Role: %v", err)
		}
		select {
		case rec := <-ended:
			if rec == nil || rec.State != lifecycle.DispatchCancelled {
				t.Fatalf("dispatch ended %+v, want cancelled", rec)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("the dispatch did not end within 2 minutes of the cancel")
		}
		if exit, err := adopted.Wait(); err != nil || (!exit.Cancelled && !exit.Lost) {
			t.Errorf("the adopting handle ended %+v, %v; want the Job gone", exit, err)
		}
		if !agoratest.Poll(time.Minute, func() bool { return !n.sleepRunning(t) }) {
			t.Fatalf("the agent's sleep still runs a minute after the cancel:\n%s", n.ps(t))
		}
		var jobs struct{ Items []any }
		if err := n.c.Do(ctx, http.MethodGet, "/apis/batch/v1/namespaces/"+n.c.Namespace+"/jobs?labelSelector=agora.dispatch%3D"+r.ID, nil, &jobs); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 0 {
			t.Errorf("the cancelled dispatch's Job is still there")
		}
	})

	t.Run("sweep", func(t *testing.T) {
		// The finished dispatch's Job stays for ttl_after_finished; serve's sweep removes it.
		if _, err := e.d.SweepRemote(ctx); err != nil {
			t.Fatalf("sweep as the Role: %v", err)
		}
		path := "/apis/batch/v1/namespaces/" + n.c.Namespace + "/jobs?labelSelector=agora.dispatch%3D" + done.ID
		if !agoratest.Poll(time.Minute, func() bool {
			var jobs struct{ Items []any }
			if err := n.c.Do(ctx, http.MethodGet, path, nil, &jobs); err != nil {
				t.Fatal(err)
			}
			return len(jobs.Items) == 0
		}) {
			t.Fatalf("the ended dispatch's Job is still there a minute after the sweep")
		}
	})
}

// confined checks that kubeconfig's identity has the Role's rights and no more: it may list
// Jobs in the namespace, and may not read Secrets nor list another namespace's pods.
func confined(t *testing.T, n *podNode, kubeconfig string) {
	t.Helper()
	kp, err := kubernetes.New(kubernetes.Options{Kubeconfig: kubeconfig, Namespace: n.c.Namespace,
		Image: n.toolchain, WorkerImage: n.workerRef, GatewayURL: n.gatewayURL, GatewayCA: n.ca, Exporter: n.reg, Target: "pod"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kp.Sweep(t.Context(), func(string) bool { return false }); err != nil {
		t.Fatalf("list jobs and policies as the Role: %v", err)
	}
	for _, probe := range []string{
		"/api/v1/namespaces/" + n.c.Namespace + "/secrets",
		"/api/v1/namespaces/kube-system/pods",
	} {
		if err := saGet(t.Context(), n, kubeconfig, probe); err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("GET %s as the Role: %v, want 403", probe, err)
		}
	}
}

// saGet is a GET of path with kubeconfig's bearer token.
func saGet(ctx context.Context, n *podNode, kubeconfig, path string) error {
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		return err
	}
	var cfg struct {
		Users []struct {
			User struct{ Token string } `json:"user"`
		} `json:"users"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return err
	}
	if len(cfg.Users) != 1 {
		return errors.New("the kubeconfig holds no single user")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.c.Server+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.Users[0].User.Token)
	tr := n.c.HTTPClient().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = nil // the token alone, not the admin's certificate
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &k8stest.StatusError{Method: "GET", Path: path, Code: resp.StatusCode}
	}
	return nil
}

// exportOnly hides the registry's Reattach: the adopting supervisor of the test must not take
// the running supervisor's streams over.
type exportOnly struct{ remote.Exporter }

// addPodTargetAs is addPodTarget with the provider authenticated by kubeconfig.
func (e *env) addPodTargetAs(n *podNode, kubeconfig string) {
	e.addPodTarget(n)
	tg := e.home.Config.Targets["pod"]
	tg.Kubeconfig = kubeconfig
	e.home.Config.Targets["pod"] = tg
}
