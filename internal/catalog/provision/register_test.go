package provision_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/digest"
)

func TestWriter_RegisterCapabilityLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	dir := capDir(t, map[string]string{
		"capability.yaml": "description: repo tools\ntools: [read_file]\n",
		"bin/run.sh":      "#!/bin/sh\necho one\n",
	})

	// First registration creates the name: one history row, one audit entry.
	c1, v1 := f.registerCap(t, "tools", dir)
	if c1.Action != catalog.ActionCreate || c1.Previous != "" {
		t.Errorf("first Register = %+v, want a create without previous", c1)
	}
	if v1.Name != "tools" || v1.Kind != catalog.KindCapability || v1.RegisteredBy != "tester" ||
		v1.Meta.Description != "repo tools" || v1.Meta.FileCount != 2 || v1.Meta.CapabilityDoc == nil ||
		!cmp.Equal(v1.Meta.CapabilityDoc.Tools, []string{"read_file"}) {
		t.Errorf("first version = %+v", v1)
	}
	content, err := f.r.Content(v1)
	if err != nil {
		t.Fatal(err)
	}
	if digest.Sum(content) != v1.Digest || int64(len(content)) != v1.Size {
		t.Errorf("stored content does not hash to the version digest")
	}
	if _, err := catalog.ReadArchive(content, catalog.Limits{MaxTotalSize: 1 << 20}); err != nil {
		t.Errorf("stored capability is not a canonical archive: %v", err)
	}
	if got := f.historyCount(t); got != 1 {
		t.Errorf("history rows = %d, want 1", got)
	}
	if got := f.auditKinds(t, 0); !cmp.Equal(got, []string{"catalog.capability.register capability/tools"}) {
		t.Errorf("audit entries = %q", got)
	}

	// The same content again changes nothing: no history row, no audit entry.
	c, v := f.registerCap(t, "tools", dir)
	if c.Action != catalog.ActionUnchanged || v.Digest != v1.Digest || c.Previous != v1.Digest {
		t.Errorf("second Register = %+v %s, want unchanged at %s", c, v.Digest, v1.Digest)
	}
	if f.historyCount(t) != 1 || f.auditCount(t) != 1 {
		t.Errorf("unchanged registration wrote history (%d) or audit (%d)", f.historyCount(t), f.auditCount(t))
	}

	// Changed content is a new version.
	writeFiles(t, dir, map[string]string{"bin/run.sh": "#!/bin/sh\necho two\n"})
	c2, v2 := f.registerCap(t, "tools", dir)
	if c2.Action != catalog.ActionUpdate || c2.Previous != v1.Digest || v2.Digest == v1.Digest {
		t.Errorf("changed Register = %+v, want update from %s", c2, v1.Digest)
	}
	if diff := cmp.Diff([]string{"create " + string(v1.Digest), "update " + string(v2.Digest)}, f.history(t, catalog.KindCapability, "tools")); diff != "" {
		t.Errorf("history mismatch (-want +got):\n%s", diff)
	}

	// The first content again makes it latest again.
	writeFiles(t, dir, map[string]string{"bin/run.sh": "#!/bin/sh\necho one\n"})
	c3, v3 := f.registerCap(t, "tools", dir)
	if c3.Action != catalog.ActionUpdate || c3.Previous != v2.Digest || v3.Digest != v1.Digest {
		t.Errorf("re-registering the first content = %+v %s, want update back to %s", c3, v3.Digest, v1.Digest)
	}
	latest, err := f.r.Resolve(ctx, catalog.KindCapability, "tools")
	if err != nil || latest.Digest != v1.Digest {
		t.Errorf("Resolve(tools) = %s, %v; want the first digest %s", latest.Digest, err, v1.Digest)
	}
	if diff := cmp.Diff([]string{
		"create " + string(v1.Digest), "update " + string(v2.Digest), "update " + string(v1.Digest),
	}, f.history(t, catalog.KindCapability, "tools")); diff != "" {
		t.Errorf("history mismatch (-want +got):\n%s", diff)
	}
	if f.auditCount(t) != 3 || f.historyCount(t) != 3 {
		t.Errorf("audit %d, history %d; want 3 and 3", f.auditCount(t), f.historyCount(t))
	}
	// Both versions stay pinnable.
	for _, d := range []digest.Digest{v1.Digest, v2.Digest} {
		if v, err := f.r.Resolve(ctx, catalog.KindCapability, "tools@"+string(d)); err != nil || v.Digest != d {
			t.Errorf("Resolve(tools@%s) = %s, %v", d.Short(), v.Digest, err)
		}
	}
	list, err := f.r.List(ctx, catalog.KindCapability)
	if err != nil || len(list) != 1 || list[0].Digest != v1.Digest {
		t.Errorf("List = %+v, %v; want one entry at the first digest", list, err)
	}
}

func TestWriter_AuditEntryContent(t *testing.T) {
	f := newFixture(t)
	dir := capDir(t, map[string]string{"a.txt": "a"})
	_, v1 := f.registerCap(t, "tools", dir)
	writeFiles(t, dir, map[string]string{"a.txt": "b"})
	_, v2 := f.registerCap(t, "tools", dir)
	var raw []byte
	var actor string
	if err := f.h.DB.SQL().QueryRow(`SELECT entry, actor FROM audit_entries WHERE seq = 1`).Scan(&raw, &actor); err != nil {
		t.Fatal(err)
	}
	var entry struct {
		Seq     int64          `json:"seq"`
		Actor   string         `json:"actor"`
		Kind    string         `json:"kind"`
		Subject string         `json:"subject"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal(raw, &entry); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"name": "tools", "action": "update", "digest": string(v2.Digest), "previous": string(v1.Digest),
		"size": float64(v2.Size),
	}
	if diff := cmp.Diff(want, entry.Details); diff != "" {
		t.Errorf("audit details mismatch (-want +got):\n%s", diff)
	}
	if entry.Seq != 1 || entry.Actor != "tester" || actor != "tester" || entry.Kind != "catalog.capability.register" || entry.Subject != "capability/tools" {
		t.Errorf("audit entry = %+v", entry)
	}
}

func TestReader_NotFound(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	_, err := f.r.Resolve(ctx, catalog.KindCapability, "x")
	if err == nil || err.Error() != `capability "x" not found; no capabilities are registered` {
		t.Errorf("Resolve on an empty catalog = %v", err)
	}
	f.registerCap(t, "b", capDir(t, map[string]string{"f": "b"}))
	f.registerCap(t, "a", capDir(t, map[string]string{"f": "a"}))
	_, err = f.r.Resolve(ctx, catalog.KindCapability, "x")
	var nf *view.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, view.ErrNotFound) {
		t.Fatalf("Resolve(x) = %v, want a NotFoundError", err)
	}
	if got, want := err.Error(), `capability "x" not found; known: a, b`; got != want {
		t.Errorf("Resolve(x) error = %q, want %q", got, want)
	}
	missing := "a@" + string(digest.Sum([]byte("nope")))
	_, err = f.r.Resolve(ctx, catalog.KindCapability, missing)
	if !errors.As(err, &nf) || !nf.Pinned || !strings.Contains(err.Error(), "no such version") {
		t.Errorf("Resolve(%s) = %v, want a pinned not-found", missing, err)
	}
	if _, err := f.r.Resolve(ctx, catalog.KindSubagent, "a"); err == nil || err.Error() != `subagent "a" not found; no subagents are registered` {
		t.Errorf("Resolve of another kind = %v", err)
	}
	if _, err := f.r.History(ctx, catalog.KindCapability, "x"); !errors.Is(err, view.ErrNotFound) {
		t.Errorf("History(x) = %v, want not found", err)
	}
	if _, err := f.r.Resolve(ctx, catalog.KindCapability, "Bad Name"); err == nil || !strings.Contains(err.Error(), "invalid capability name") {
		t.Errorf("Resolve(bad name) = %v", err)
	}
}

func TestWriter_PruneRetires(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	_, keep := f.registerCap(t, "keep", capDir(t, map[string]string{"f": "keep"}))
	_, gone := f.registerCap(t, "gone", capDir(t, map[string]string{"f": "gone"}))
	f.registerEnv(t, "old-env", map[string]string{"A": "1"}, nil)
	p, err := f.w.PrepareCapability("keep", capDir(t, map[string]string{"f": "keep"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := f.w.Plan(ctx, []*provision.Pending{p}, true)
	if err != nil {
		t.Fatal(err)
	}
	summary := func(cs []provision.Change) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Action+" "+string(c.Kind)+" "+c.Name)
		}
		return out
	}
	want := []string{"unchanged capability keep", "retire capability gone", "retire env old-env"}
	if diff := cmp.Diff(want, summary(changes), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("plan mismatch (-want +got):\n%s", diff)
	}
	if changes[0].Kind != catalog.KindCapability || changes[len(changes)-1].Kind != catalog.KindEnv {
		t.Errorf("plan is not in kind order: %v", summary(changes))
	}
	audits, history := f.auditCount(t), f.historyCount(t)
	done, err := f.w.Apply(ctx, "pruner", "apply", changes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, summary(done), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("applied mismatch (-want +got):\n%s", diff)
	}
	if got := f.auditCount(t) - audits; got != 2 {
		t.Errorf("prune added %d audit entries, want 2 (one per retirement)", got)
	}
	if got := f.historyCount(t) - history; got != 2 {
		t.Errorf("prune added %d history rows, want 2", got)
	}
	if diff := cmp.Diff([]string{"catalog.capability.retire capability/gone", "catalog.env.retire env/old-env"}, f.auditKinds(t, audits)); diff != "" {
		t.Errorf("audit mismatch (-want +got):\n%s", diff)
	}
	// Retired: gone from lists and from name resolution, still in history and pinnable.
	names, _ := f.r.Names(ctx, catalog.KindCapability)
	if !cmp.Equal(names, []string{"keep"}) {
		t.Errorf("Names after prune = %v", names)
	}
	if _, err := f.r.Resolve(ctx, catalog.KindCapability, "gone"); !errors.Is(err, view.ErrNotFound) ||
		err.Error() != `capability "gone" not found; known: keep` {
		t.Errorf("Resolve(gone) = %v", err)
	}
	if v, err := f.r.Resolve(ctx, catalog.KindCapability, "gone@"+string(gone.Digest)); err != nil || v.Digest != gone.Digest {
		t.Errorf("pinned Resolve of a retired name = %v, %v", v.Digest, err)
	}
	if diff := cmp.Diff([]string{"create " + string(gone.Digest), "retire " + string(gone.Digest)}, f.history(t, catalog.KindCapability, "gone")); diff != "" {
		t.Errorf("history mismatch (-want +got):\n%s", diff)
	}
	// A second pruning apply has nothing to do.
	again, err := f.w.Plan(ctx, []*provision.Pending{p}, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"unchanged capability keep"}, summary(again)); diff != "" {
		t.Errorf("second plan mismatch (-want +got):\n%s", diff)
	}
	// Registering a retired name again creates it anew.
	c, v := f.registerCap(t, "gone", capDir(t, map[string]string{"f": "gone"}))
	if c.Action != catalog.ActionCreate || v.Digest != gone.Digest {
		t.Errorf("re-registering a retired name = %+v", c)
	}
	if r, err := f.r.Resolve(ctx, catalog.KindCapability, "gone"); err != nil || r.Digest != gone.Digest {
		t.Errorf("Resolve after re-register = %v", err)
	}
	if v, err := f.r.Resolve(ctx, catalog.KindCapability, "keep"); err != nil || v.Digest != keep.Digest {
		t.Errorf("Resolve(keep) = %v, %v", v.Digest, err)
	}
}

func TestWriter_PlanRefusesDuplicates(t *testing.T) {
	f := newFixture(t)
	p1, err := f.w.PrepareEnv("dup", map[string]string{"A": "1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := f.w.PrepareEnv("dup", map[string]string{"A": "2"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.w.Plan(t.Context(), []*provision.Pending{p1, p2}, false); err == nil ||
		err.Error() != `env bundle "dup" is declared twice` {
		t.Errorf("Plan with a duplicate = %v", err)
	}
}

func TestWriter_ApplyIsAllOrNothing(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	_, a1 := f.registerEnv(t, "a", map[string]string{"V": "1"}, nil)
	f.registerEnv(t, "z", map[string]string{"V": "1"}, nil)
	audits, history := f.auditCount(t), f.historyCount(t)
	versions := f.count(t, `SELECT COUNT(*) FROM catalog_versions`)
	secrets := f.count(t, `SELECT COUNT(*) FROM sealed_secrets`)

	// The second change of the batch fails inside the transaction, after the first has
	// written its version, history, head, sealed secret and audit entry.
	if _, err := f.h.DB.SQL().Exec(`CREATE TRIGGER inject_failure BEFORE INSERT ON catalog_history
WHEN NEW.name = 'b' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
		t.Fatal(err)
	}
	pa, err := f.w.PrepareEnv("a", map[string]string{"V": "2"}, map[string][]byte{"S": []byte("secret-a")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := f.w.PrepareEnv("b", map[string]string{"V": "1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := f.w.Plan(ctx, []*provision.Pending{pb, pa}, true)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, c := range changes {
		order = append(order, c.Action+" "+c.Name)
	}
	if diff := cmp.Diff([]string{"update a", "create b", "retire z"}, order); diff != "" {
		t.Fatalf("plan mismatch (-want +got):\n%s", diff)
	}
	_, err = f.w.Apply(ctx, "tester", "apply", changes, nil)
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Apply = %v, want the injected failure", err)
	}
	if got := f.auditCount(t); got != audits {
		t.Errorf("audit entries %d -> %d after a failed apply", audits, got)
	}
	if got := f.historyCount(t); got != history {
		t.Errorf("history rows %d -> %d after a failed apply", history, got)
	}
	if got := f.count(t, `SELECT COUNT(*) FROM catalog_versions`); got != versions {
		t.Errorf("versions %d -> %d after a failed apply", versions, got)
	}
	if got := f.count(t, `SELECT COUNT(*) FROM sealed_secrets`); got != secrets {
		t.Errorf("sealed secrets %d -> %d after a failed apply", secrets, got)
	}
	if v, err := f.r.Resolve(ctx, catalog.KindEnv, "a"); err != nil || v.Digest != a1.Digest {
		t.Errorf("head of a moved to %s (%v) although the apply failed", v.Digest, err)
	}
	if names, _ := f.r.Names(ctx, catalog.KindEnv); !cmp.Equal(names, []string{"a", "z"}) {
		t.Errorf("names after a failed apply = %v, want [a z]", names)
	}

	// Without the fault the same plan lands whole, with one audit entry per change.
	if _, err := f.h.DB.SQL().Exec(`DROP TRIGGER inject_failure`); err != nil {
		t.Fatal(err)
	}
	done, err := f.w.Apply(ctx, "tester", "apply", changes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 3 || f.auditCount(t) != audits+3 || f.historyCount(t) != history+3 {
		t.Errorf("apply: %d changes, audit +%d, history +%d; want 3 each", len(done), f.auditCount(t)-audits, f.historyCount(t)-history)
	}
}

func TestWriter_ApplyRechecksInsideTransaction(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	p, err := f.w.PrepareEnv("e", map[string]string{"V": "1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := f.w.Plan(ctx, []*provision.Pending{p}, false)
	if err != nil || changes[0].Action != catalog.ActionCreate {
		t.Fatalf("Plan = %+v, %v", changes, err)
	}
	// Someone else registers the same content between plan and apply.
	f.registerEnv(t, "e", map[string]string{"V": "1"}, nil)
	audits := f.auditCount(t)
	done, err := f.w.Apply(ctx, "tester", "apply", changes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done[0].Action != catalog.ActionUnchanged || f.auditCount(t) != audits {
		t.Errorf("stale create applied as %q with %d new audit entries, want unchanged and none", done[0].Action, f.auditCount(t)-audits)
	}
}

func TestWriter_ApplySummary(t *testing.T) {
	f := newFixture(t)
	p, err := f.w.PrepareEnv("e", map[string]string{"V": "1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := f.w.Plan(t.Context(), []*provision.Pending{p}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.w.Apply(t.Context(), "ci", "apply", changes, &auditEntry); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"catalog.env.apply env/e", "catalog.apply manifest/m.yaml"}, f.auditKinds(t, 0)); diff != "" {
		t.Errorf("audit mismatch (-want +got):\n%s", diff)
	}
}

var auditEntry = audit.Entry{Actor: "ci", Kind: "catalog.apply", Subject: "manifest/m.yaml", Details: map[string]any{"prune": false}}
