package k8stest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// fenceAfterThaw freezes the leader lead's serve (containerd pauses its cgroup: the process
// sees nothing, as in a VM pause or a stalled node, and its boot clock runs on) until the
// standby has taken the Lease, restored the home and serves, then thaws it. The old leader
// must notice it lost the Lease and exit (the kubelet restarts it, as a standby) without one
// more upload to its replica generation: the bucket holds nothing new of it. It returns the
// new leader.
func (w *leaderWorld) fenceAfterThaw(ctx context.Context, lead podInfo) podInfo {
	t := w.t
	t.Helper()
	gens := map[string]bool{}
	for _, db := range []string{"agora", "orch"} {
		var st struct{ Generation string }
		b, err := os.ReadFile(filepath.Join(w.pvs[lead.name], "home", db+"-replicate.json"))
		if err != nil || json.Unmarshal(b, &st) != nil || st.Generation == "" {
			t.Fatalf("%s's %s-replicate.json: %v %s", lead.name, db, err, b)
		}
		gens["/"+st.Generation+"/"] = true
	}
	ours := func(names []string) (n []string) {
		for _, x := range names {
			for g := range gens {
				if strings.Contains(x, g) {
					n = append(n, x)
				}
			}
		}
		return n
	}
	before := w.serveContainer(ctx, lead.name)
	if out, err := w.c.Ctr(ctx, "tasks", "pause", before.id); err != nil {
		t.Fatalf("ctr tasks pause: %v\n%s", err, out)
	}
	frozen := time.Now()
	next := w.waitLeading(ctx, frozen)
	listed, err := w.bucket.List(ctx, "replica/")
	if err != nil {
		t.Fatal(err)
	}
	mine := ours(listed)
	if len(mine) == 0 {
		t.Fatalf("no object of %s's generations %v in the bucket: %v", lead.name, gens, listed)
	}
	t.Logf("%s (frozen) was replaced by %s after %s", lead.name, next.name, time.Since(frozen).Round(time.Millisecond))
	if out, err := w.c.Ctr(ctx, "tasks", "resume", before.id); err != nil {
		t.Fatalf("ctr tasks resume: %v\n%s", err, out)
	}
	for w.serveContainer(ctx, lead.name).restarts == before.restarts {
		select {
		case <-ctx.Done():
			t.Fatalf("the thawed old leader %s never stopped: %v\n%s", lead.name, ctx.Err(), podLog(context.Background(), w.c, "agora", lead.name, "agora"))
		case <-time.After(200 * time.Millisecond):
		}
	}
	var prev []byte
	if err := w.c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agora/pods/"+lead.name+"/log?container=agora&previous=true", nil, &prev); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(prev), "lost the leader lease") {
		t.Errorf("the thawed old leader did not stop saying it lost the lease:\n%s", prev)
	}
	after, err := w.bucket.List(ctx, "replica/")
	if err != nil {
		t.Fatal(err)
	}
	if got := ours(after); !slices.Equal(got, mine) {
		t.Errorf("the thawed old leader uploaded to its generation: %d objects of it before the thaw, %d after", len(mine), len(got))
	}
	if holder, _ := leaseHolder(ctx, w.c); holder != next.name {
		t.Errorf("the Lease is %q's after the thaw, want %s's", holder, next.name)
	}
	return next
}
