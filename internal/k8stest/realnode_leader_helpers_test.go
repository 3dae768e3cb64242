package k8stest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/s3"
)

// leaderWorld is the leader kill's world: the cluster with deploy/kubernetes/ha applied, the
// images, versitygw on the node IP, the operator's agora (built from this tree) and keys, and
// each replica's volume on this host by pod name.
type leaderWorld struct {
	t      *testing.T
	c      *k8stest.Cluster
	im     deployImages
	bin    string            // agora on this host: the operator's workstation
	home   string            // the operator's AGORA_HOME there
	keys   string            // the operator's keys/, the Secret agora-keys
	pvs    map[string]string // pod name -> its volume's directory
	s3Env  []any             // the bucket's credentials from the Secret agora-s3, as serve gets them
	s3     s3.Credentials    // and their values
	bucket *s3.Client        // the bucket, as the test reads it
}

// startLeaderWorld starts versitygw on the node IP (where the pods reach this host) with a
// bucket, makes the keys with `agora init` as the statefulset.yaml's comment says, and applies
// namespaces.yaml, rbac.yaml, the two Secrets and ha/*.yaml with a volume for each replica.
func startLeaderWorld(ctx context.Context, t *testing.T, c *k8stest.Cluster) *leaderWorld {
	t.Helper()
	if b, err := s3test.Bin(); err != nil {
		t.Fatal(err)
	} else if _, err := os.Stat(b); err != nil {
		t.Skip("SKIP: versitygw not built at " + b + ": run scripts/s3-tools.sh")
	}
	srv, err := s3test.StartOn(k8stest.RealNodeIP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	bucket := srv.Bucket(t, false)
	replica := bucket // where the pods replicate: ha/config.yaml's prefix in the test's bucket
	replica.Prefix = haConfig(t, "agora-0").Replicate.S3.Prefix
	client := srv.Client(t, replica)
	bin, cleanup, err := agoratest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	w := &leaderWorld{t: t, c: c, bin: bin, home: filepath.Join(t.TempDir(), "operator"), pvs: map[string]string{}, s3: srv.Creds, bucket: client}
	// As statefulset.yaml's comment says: the keys and the gateway's CA the replicas share.
	if out := w.agora(t, "init", "--gateway-ca"); out != "" {
		t.Fatal(out)
	}
	w.keys = filepath.Join(w.home, "keys")
	keys := map[string][]byte{}
	for _, k := range []string{"secret.key", "audit.key", "audit.pub", "callback.key", "gateway-ca.pem", "gateway-ca.key"} {
		if keys[k], err = os.ReadFile(filepath.Join(w.keys, k)); err != nil {
			t.Fatal(err)
		}
	}
	w.im = buildDeployImages(ctx, t, c)
	var objs []map[string]any
	for _, pod := range []string{"agora-0", "agora-1"} {
		dir, pv := homeVolume(t, "agora", "home-"+pod)
		w.pvs[pod] = dir
		objs = append(objs, pv)
	}
	objs = append(objs, manifestObjects(t, w.im, "namespaces.yaml", "rbac.yaml")...)
	objs = append(objs,
		secretObject("agora-keys", keys),
		secretObject("agora-s3", map[string][]byte{"access_key_id": []byte(srv.Creds.AccessKeyID), "secret_access_key": []byte(srv.Creds.SecretAccessKey)}))
	// statefulset.yaml's header: the web view's and MCP's token Secrets.
	objs = append(objs, surfaceTokenSecrets(t)...)
	site := []string{
		`"https://s3.example.invalid"`, `"` + bucket.Endpoint + `"`,
		"bucket: agora,", "bucket: " + bucket.Bucket + ",",
		"allow_private: []", "allow_private: [" + k8stest.RealNodeIP + "/32]",
	}
	objs = append(objs, siteManifestObjects(t, w.im, site, "ha/rbac.yaml", "ha/config.yaml", "ha/statefulset.yaml")...)
	for _, obj := range objs {
		if err := c.Apply(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		w.s3Env = append(w.s3Env, map[string]any{"name": k, "valueFrom": map[string]any{"secretKeyRef": map[string]string{
			"name": "agora-s3", "key": strings.ToLower(strings.TrimPrefix(k, "AWS_")),
		}}})
	}
	return w
}

// agora runs the operator's agora on this host with w.home as AGORA_HOME; it returns "" on
// success, else the error and the output.
func (w *leaderWorld) agora(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AGORA_HOME=" + w.home, "HOME=" + filepath.Dir(w.home)}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("agora %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return ""
}

// waitLeading waits for the Lease's holder to serve and returns its pod. With after zero, the
// first leader, with the other replica saying it waits as a standby. Else a leader that took
// the Lease after that instant (its acquireTime, written by the taker on this host's clock)
// and restored the home from the replica: the standby, or the StatefulSet's new pod of a
// killed leader, which waits the dead process's record out like any other and may win the
// race (both wait about one duration).
func (w *leaderWorld) waitLeading(ctx context.Context, after time.Time) podInfo {
	t, c := w.t, w.c
	t.Helper()
	first := after.IsZero()
	for {
		holder, acquired := leaseHolder(ctx, c)
		var lead *podInfo
		standby := false
		for _, p := range podsOf(ctx, t, c, "agora", "app%3Dagora") {
			log := podLog(ctx, c, "agora", p.name, "agora")
			switch {
			case p.name == holder && p.phase == "Running" && containsAll(log, "orchestrator serving on", "gateway serving"):
				if p.node != k8stest.RealNodeName {
					t.Fatalf("serve's pod %s runs on %q", p.name, p.node)
				}
				if first || (acquired.After(after) && strings.Contains(log, "restored orch.db from the replica")) {
					lead = &p
				}
			case p.phase == "Running" && strings.Contains(log, "standby: waiting for the leader lease"):
				standby = true
			}
		}
		if lead != nil && (standby || !first) {
			return *lead
		}
		if why := crashLooping(ctx, c, "app%3Dagora"); why != "" {
			t.Fatalf("a replica crash-loops: %s", why)
		}
		select {
		case <-ctx.Done():
			var logs strings.Builder
			for _, p := range podsOf(context.Background(), t, c, "agora", "app%3Dagora") {
				fmt.Fprintf(&logs, "%s %s:\n%s\n", p.name, p.phase, podLog(context.Background(), c, "agora", p.name, "agora"))
			}
			var ev []byte
			_ = c.Do(context.Background(), http.MethodGet, "/api/v1/namespaces/agora/events", nil, &ev)
			t.Fatalf("no replica leads (holder %q, acquired after %v): %v\n%s\nevents:\n%s", holder, after, ctx.Err(), logs.String(), tail(string(ev), 6000))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// leaderRun is what the test reads of `agora orch status -o json`.
type leaderRun struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Tasks []struct {
		ID         string `json:"id"`
		State      string `json:"state"`
		Attempts   int    `json:"attempts"`
		DispatchID string `json:"dispatch_id"`
	} `json:"tasks"`
}

func (r leaderRun) task(id string) (string, int) {
	for _, x := range r.Tasks {
		if x.ID == id {
			return x.State, x.Attempts
		}
	}
	return "", 0
}

func readStatus(t *testing.T, path string) leaderRun {
	t.Helper()
	var r leaderRun
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return r
}

// waitRunning waits on the leader's volume pv until the run's task c runs after a and b
// succeeded, then until serve has replicated both databases from a snapshot read after that
// (a's and b's ends are in the bucket), and returns the run's id.
func (w *leaderWorld) waitRunning(ctx context.Context, pv string, leader podInfo) string {
	t := w.t
	t.Helper()
	fail := func(what string) {
		t.Fatalf("%s: %v\nserve:\n%s\ndriver:\n%s", what, ctx.Err(), podLog(context.Background(), w.c, "agora", leader.name, "agora"),
			jobLog(w.c, "agora-submit"))
	}
	status := filepath.Join(pv, "out", "status.json")
	for {
		var r leaderRun
		if b, err := os.ReadFile(status); err == nil && json.Unmarshal(b, &r) == nil {
			a, _ := r.task("a")
			b, _ := r.task("b")
			// Mid-run: c's agent runs, its first line streamed to the leader (stdout.log in
			// the stage on the leader's volume), so its worker fetched its inputs from the
			// leader before the kill (a pod still fetching when its leader dies cannot be
			// served them by the next one: docs/providers-k8s.md, "What a takeover carries").
			if c, _ := r.task("c"); a == "succeeded" && b == "succeeded" && c == "running" && agentStarted(pv, r) {
				break
			}
			if r.State == "failed" {
				fail(fmt.Sprintf("the run failed before the kill: %+v", r))
			}
		}
		select {
		case <-ctx.Done():
			fail("task c never ran")
		case <-time.After(200 * time.Millisecond):
		}
	}
	seen := time.Now()
	for fresh := 0; fresh < 2; {
		fresh = 0
		for _, db := range []string{"agora", "orch"} {
			var st struct{ Replicated time.Time }
			if b, err := os.ReadFile(filepath.Join(pv, "home", db+"-replicate.json")); err == nil && json.Unmarshal(b, &st) == nil && st.Replicated.After(seen) {
				fresh++
			}
		}
		select {
		case <-ctx.Done():
			fail("serve never replicated after c started")
		case <-time.After(100 * time.Millisecond):
		}
	}
	run, err := os.ReadFile(filepath.Join(pv, "out", "run"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(run))
}

// jobLog is the log of Job name's pod in namespace agora.
func jobLog(c *k8stest.Cluster, name string) string {
	var list struct {
		Items []struct{ Metadata struct{ Name string } }
	}
	ctx := context.Background()
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agora/pods?labelSelector=job-name%3D"+name, nil, &list); err != nil || len(list.Items) == 0 {
		return fmt.Sprintf("(no pod of Job %s: %v)", name, err)
	}
	return podLog(ctx, c, "agora", list.Items[0].Metadata.Name, "driver")
}

// takeoverTimes is when the new leader acquired the Lease (the Lease's acquireTime) and when
// its serve said it serves (the kubelet's timestamp of that log line).
func (w *leaderWorld) takeoverTimes(ctx context.Context, next podInfo) (acquired, serving time.Time) {
	t := w.t
	t.Helper()
	_, acquired = leaseHolder(ctx, w.c)
	var b []byte
	if err := w.c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agora/pods/"+next.name+"/log?container=agora&timestamps=true", nil, &b); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		ts, line, _ := strings.Cut(sc.Text(), " ")
		if strings.Contains(line, "orchestrator serving on") {
			if serving, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				return acquired, serving
			}
		}
	}
	t.Fatalf("no timestamped serving line in %s's log:\n%s", next.name, b)
	return
}

// bundleEntry is an entry of a run bundle's orch.db part.
type bundleEntry struct{ Kind, Subject string }

// task is the task id of an entry whose subject is run/RUN/task/ID.
func (e bundleEntry) task() string {
	if _, id, ok := strings.Cut(e.Subject, "/task/"); ok {
		return id
	}
	return ""
}

// bundleEntries decodes the orch.db entries of the run bundle at path.
func bundleEntries(t *testing.T, path string) []bundleEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := verify.ParseRunBundle(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []bundleEntry
	for _, e := range b.Orch.Entries {
		fields, err := verify.DecodeEntry(e.Entry)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bundleEntry{fields.Kind, fields.Subject})
	}
	return out
}

// crashLooping names the first container of a pod of namespace agora matching selector that
// has restarted twice, with its log, or is "".
func crashLooping(ctx context.Context, c *k8stest.Cluster, selector string) string {
	type status struct {
		Name         string
		RestartCount int
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct{ InitContainerStatuses, ContainerStatuses []status }
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agora/pods?labelSelector="+selector, nil, &list); err != nil {
		return ""
	}
	for _, p := range list.Items {
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if s.RestartCount >= 2 {
				var b []byte
				_ = c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/namespaces/agora/pods/%s/log?container=%s&previous=true", p.Metadata.Name, s.Name), nil, &b)
				return fmt.Sprintf("%s/%s restarted %d times:\n%s", p.Metadata.Name, s.Name, s.RestartCount, b)
			}
		}
	}
	return ""
}

// kill kills serve in pod p with SIGKILL through the node's containerd (no SIGTERM: a serve
// that gets one hands the Lease back), then deletes the pod with gracePeriodSeconds=0, so that
// the kubelet does not restart serve in it; it returns when the SIGKILL was sent.
func (w *leaderWorld) kill(ctx context.Context, p podInfo) time.Time {
	t := w.t
	t.Helper()
	id := w.serveContainer(ctx, p.name).id
	killed := time.Now()
	if out, err := w.c.Ctr(ctx, "tasks", "kill", "-s", "SIGKILL", id); err != nil {
		t.Fatalf("ctr tasks kill %s: %v\n%s", id, err, out)
	}
	if err := w.c.Do(ctx, http.MethodDelete, "/api/v1/namespaces/agora/pods/"+p.name+"?gracePeriodSeconds=0", nil, nil); err != nil {
		t.Fatal(err)
	}
	return killed
}

// serveState is pod's agora container as the kubelet reports it.
type serveState struct {
	id       string // containerd's
	restarts int
}

func (w *leaderWorld) serveContainer(ctx context.Context, pod string) serveState {
	t := w.t
	t.Helper()
	var p struct {
		Status struct {
			ContainerStatuses []struct {
				Name, ContainerID string
				RestartCount      int
			}
		}
	}
	if err := w.c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agora/pods/"+pod, nil, &p); err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "agora" && s.ContainerID != "" {
			return serveState{strings.TrimPrefix(s.ContainerID, "containerd://"), s.RestartCount}
		}
	}
	t.Fatalf("pod %s has no agora container: %+v", pod, p.Status)
	return serveState{}
}

// waitStandby waits for pod name, the replica that does not lead after the takeover, to wait
// as a standby while lead still holds the Lease: one leader, never two.
func (w *leaderWorld) waitStandby(ctx context.Context, name, lead string) {
	t := w.t
	t.Helper()
	for {
		log := podLog(ctx, w.c, "agora", name, "agora")
		if strings.Contains(log, "orchestrator serving on") {
			t.Fatalf("%s serves beside the leader %s:\n%s", name, lead, log)
		}
		if holder, _ := leaseHolder(ctx, w.c); holder != lead {
			t.Fatalf("the Lease moved to %q after the takeover by %s", holder, lead)
		}
		if strings.Contains(log, "standby: waiting for the leader lease") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never waited as a standby: %v\n%s", name, ctx.Err(), log)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkStandbyClosed: the replica that does not lead listens on no gateway (a Job's worker
// that reached it would reach a serve that commits nothing), no web view, no metrics and no
// MCP (its agora mcp would write a home nobody serves): its pod's ports 8443, 8080,
// 9090 and 8765 refuse, from this host on the pod network, while the leader's answer (MCP
// once the leader's serve is ready: its container waits for serve's /readyz).
func (w *leaderWorld) checkStandbyClosed(ctx context.Context, lead string) {
	t := w.t
	t.Helper()
	for _, p := range podsOf(ctx, t, w.c, "agora", "app%3Dagora") {
		for _, port := range []string{"8443", "8080", "9090", "8765"} {
			dial := func() error {
				conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.ip, port), 5*time.Second)
				if err == nil {
					conn.Close()
				}
				return err
			}
			var err error
			if p.name == lead {
				err = agoratest.Await(30*time.Second, dial) // the leader's ports open as it starts
			} else {
				err = dial()
			}
			switch {
			case p.name == lead && err != nil:
				t.Errorf("the leader %s does not answer on port %s at %s: %v", p.name, port, p.ip, err)
			case p.name != lead && err == nil:
				t.Errorf("the standby %s accepts connections on port %s at %s", p.name, port, p.ip)
			}
		}
	}
	// The standby is no endpoint of agora-gateway-vip: only the leader is Ready (its gateway's
	// /readyz, the readiness probe). The leader's probe may lag its first serving line by a
	// period.
	standbyReady := false
	err := agoratest.Await(30*time.Second, func() error {
		lr, sr := w.ready(ctx, lead), w.ready(ctx, otherReplica(lead))
		if standbyReady = sr; sr || lr {
			return nil
		}
		return errors.New("not Ready")
	})
	switch {
	case standbyReady:
		t.Errorf("the standby %s is Ready: an endpoint of the gateway's Service", otherReplica(lead))
	case err != nil:
		t.Errorf("the leader %s is not Ready 30 s after it serves", lead)
	}
}

// ready reports whether pod name's Ready condition is True.
func (w *leaderWorld) ready(ctx context.Context, name string) bool {
	var p struct {
		Status struct {
			Conditions []struct{ Type, Status string }
		}
	}
	if err := w.c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agora/pods/"+name, nil, &p); err != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// dispatchPods records every pod of a dispatch that appears in namespace agents while it
// runs, by dispatch id: its uid and the most restarts its worker container was seen with. It
// is how the test counts how often a task's worker ran: a second Job, a second pod or a
// restarted container would each show.
type dispatchPods struct {
	mu   sync.Mutex
	pods map[string]map[string]int // dispatch id -> pod uid -> restarts
}

// watchDispatchPods polls namespace agents every 250 ms until ctx ends.
func watchDispatchPods(ctx context.Context, c *k8stest.Cluster) *dispatchPods {
	d := &dispatchPods{pods: map[string]map[string]int{}}
	go func() {
		for ctx.Err() == nil {
			var list struct {
				Items []struct {
					Metadata struct {
						UID    string
						Labels map[string]string
					}
					Status struct {
						ContainerStatuses []struct{ RestartCount int }
					}
				}
			}
			if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agents/pods?labelSelector=agora.dispatch", nil, &list); err == nil {
				d.mu.Lock()
				for _, p := range list.Items {
					id := p.Metadata.Labels["agora.dispatch"]
					if d.pods[id] == nil {
						d.pods[id] = map[string]int{}
					}
					r := d.pods[id][p.Metadata.UID]
					for _, cs := range p.Status.ContainerStatuses {
						r = max(r, cs.RestartCount)
					}
					d.pods[id][p.Metadata.UID] = r
				}
				d.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return d
}

// of returns the pods seen for dispatch id: uid -> restarts.
func (d *dispatchPods) of(id string) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, v := range d.pods[id] {
		out[k] = v
	}
	return out
}

// agentStarted reports whether task c's agent has written its first line ("working") to its
// dispatch's stdout.log on the leader's volume pv.
func agentStarted(pv string, r leaderRun) bool {
	for _, x := range r.Tasks {
		if x.ID == "c" && x.DispatchID != "" {
			b, err := os.ReadFile(filepath.Join(pv, "home", "dispatches", x.DispatchID, "stdout.log"))
			return err == nil && strings.Contains(string(b), "working")
		}
	}
	return false
}
