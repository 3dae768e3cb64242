package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// RunFormat is the version tag of a run bundle: one orchestrator run with every dispatch of it.
const RunFormat = "agora-run-bundle/v1"

// Checks of a run bundle, after the rows of its two log bundles.
const (
	CheckRun         = "run"
	CheckRunEntries  = "run entries"
	CheckDispatches  = "run dispatches"
	CheckBinding     = "manifest binding"
	CheckProvenance  = "provenance"
	emptyDigest      = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	maxManifestBytes = 1 << 20
)

// RunBundle is `agora orch audit RUN`'s output (docs/audit-bundle.md): the run's entries of
// orch.db and its dispatches' entries of agora.db, each a [Bundle] with its own proofs, and
// the dispatch manifests.
type RunBundle struct {
	Format string  `json:"format"`
	Run    RunInfo `json:"run"`
	// Orch selects subject run/<id> from orch.db; its entries say what the engine did.
	Orch *Bundle `json:"orch"`
	// Dispatches selects subject dispatch/<id> for every attempt from agora.db, and carries
	// each dispatch's manifest.
	Dispatches *Bundle `json:"dispatches"`
}

// RunInfo names the run.
type RunInfo struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	PlanDigest string `json:"plan_digest"`
}

// IsRunBundle reports whether data looks like a run bundle (by its format field).
func IsRunBundle(data []byte) bool {
	var head struct {
		Format string `json:"format"`
	}
	return json.Unmarshal(data, &head) == nil && head.Format == RunFormat
}

// ParseRunBundle reads a run bundle strictly (size-capped, unknown fields refused).
func ParseRunBundle(r io.Reader) (*RunBundle, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBundleSize+1))
	if err != nil {
		return nil, fmt.Errorf("read run bundle: %w", err)
	}
	if len(data) > MaxBundleSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBundle, MaxBundleSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b RunBundle
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBundle, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the bundle object", ErrBundle)
	}
	if b.Format != RunFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrBundle, truncate(b.Format, 40), RunFormat)
	}
	for name, part := range map[string]*Bundle{"orch": b.Orch, "dispatches": b.Dispatches} {
		if part == nil {
			return nil, fmt.Errorf("%w: the run bundle has no %s part", ErrBundle, name)
		}
		if err := part.checkFormat(); err != nil {
			return nil, fmt.Errorf("%s part: %w", name, err)
		}
		if part.Entries == nil || part.Manifests == nil {
			return nil, fmt.Errorf("%w: %s part: entries and manifests must be lists", ErrBundle, name)
		}
	}
	return &b, nil
}

// VerifyRun checks both parts of a run bundle like [Verify] (their rows prefixed "orch " and
// "dispatches "), then the run: it is sealed and its entries are all there; every attempt's
// dispatch is in the bundle; every manifest agrees with its dispatch's entries; and every
// input of a task is the product of a succeeded task of the same run.
func VerifyRun(b *RunBundle, opts Options) *Report {
	rep := &Report{Checks: []Result{}}
	var parts [2]*verifier
	for i, p := range []struct {
		name string
		b    *Bundle
	}{{"orch", b.Orch}, {"dispatches", b.Dispatches}} {
		v := &verifier{b: p.b, opts: opts, rep: &Report{Checks: []Result{}}, tiers: map[string]bool{}, refs: map[string]uint64{}}
		v.checkKey()
		v.checkCheckpoint()
		v.checkEntries()
		v.checkAnchored()
		v.checkManifests()
		for _, r := range v.rep.Checks {
			r.Check = p.name + " " + r.Check
			rep.Checks = append(rep.Checks, r)
		}
		rep.KeySource = v.rep.KeySource
		if v.rep.TrustedTime != "" {
			rep.TrustedTime = v.rep.TrustedTime
		}
		parts[i] = v
	}
	rv := &runVerifier{b: b, rep: rep, orch: parts[0], disp: parts[1]}
	rv.check()
	rep.OK = len(rep.Failed()) == 0
	switch {
	case !rep.OK:
		rep.Tier = TierNone
	default:
		// The run is only as strong as its weaker log.
		rep.Tier = weaker(tierOf(parts[0]), tierOf(parts[1]))
	}
	return rep
}

func tierOf(v *verifier) string {
	switch {
	case v.tiers[TierTamperEvident]:
		return TierTamperEvident
	case v.tiers[TierTrustedTime]:
		return TierTrustedTime
	}
	return TierTamperDetecting
}

func weaker(a, b string) string {
	rank := map[string]int{TierTamperDetecting: 0, TierTrustedTime: 1, TierTamperEvident: 2}
	if rank[a] < rank[b] {
		return a
	}
	return b
}

type runVerifier struct {
	b          *RunBundle
	rep        *Report
	orch, disp *verifier
}

func (rv *runVerifier) pass(check, item, format string, args ...any) {
	rv.rep.Checks = append(rv.rep.Checks, Result{Check: check, Item: item, OK: true, Detail: fmt.Sprintf(format, args...)})
}

func (rv *runVerifier) fail(check, item, format string, args ...any) {
	rv.rep.Checks = append(rv.rep.Checks, Result{Check: check, Item: item, OK: false, Detail: fmt.Sprintf(format, args...)})
}

// dispatchManifest is the part of a dispatch manifest the checks read.
type dispatchManifest struct {
	Format      string   `json:"format"`
	Dispatch    string   `json:"dispatch"`
	Subagent    string   `json:"subagent"`
	Envs        []string `json:"envs"`
	InputDigest string   `json:"input_digest"`
	State       string   `json:"state"`
	Inputs      []struct {
		Key          string         `json:"key"`
		Select       string         `json:"select"`
		FromDispatch string         `json:"from_dispatch"`
		Files        []manifestFile `json:"files"`
	} `json:"inputs"`
	Products struct {
		Patch   string         `json:"patch"`
		Outputs []manifestFile `json:"outputs"`
	} `json:"products"`
	digest string
}

type manifestFile struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

func (rv *runVerifier) check() {
	id := rv.b.Run.ID
	runSubject := "run/" + id
	if subs := rv.b.Orch.Selection.Subjects; len(subs) != 1 || subs[0] != runSubject {
		rv.fail(CheckRun, "", "the orch part selects %q, want exactly [%q]", subs, runSubject)
		return
	}
	// The run: submitted with this name and plan, sealed, and every entry of it present.
	var submitted, sealed *EntryFields
	fired := map[string]string{}     // dispatch id -> task
	succeeded := map[string]string{} // dispatch id -> task
	for i := range rv.orch.entries {
		e := &rv.orch.entries[i]
		switch e.Kind {
		case "orch.run.submitted":
			submitted = e
		case "orch.run.sealed":
			sealed = e
		case "orch.task.fired":
			if d, ok := e.Details["dispatch_id"].(string); ok {
				fired[d] = taskOf(e.Subject)
			}
		case "orch.task.succeeded":
			if d, ok := e.Details["dispatch_id"].(string); ok {
				succeeded[d] = taskOf(e.Subject)
			}
		}
	}
	switch {
	case submitted == nil:
		rv.fail(CheckRun, "", "no orch.run.submitted entry for run %s", id)
	case submitted.Details["run_name"] != rv.b.Run.Name || submitted.Details["plan_digest"] != rv.b.Run.PlanDigest:
		rv.fail(CheckRun, "", "run %s was submitted as %v with plan %v, the bundle says %s with plan %s", id,
			submitted.Details["run_name"], submitted.Details["plan_digest"], rv.b.Run.Name, rv.b.Run.PlanDigest)
	case sealed == nil:
		rv.fail(CheckRun, "", "run %s is not sealed in the bundle: later entries could still change it", id)
	default:
		rv.pass(CheckRun, "", "run %s (%s), plan %s, sealed %v", id, rv.b.Run.Name, rv.b.Run.PlanDigest, sealed.Details["state"])
	}
	if sealed != nil {
		want, err := strconv.Atoi(fmt.Sprint(sealed.Details["entries"]))
		switch {
		case err != nil:
			rv.fail(CheckRunEntries, "", "the seal records no entry count")
		case len(rv.orch.entries) != want+1:
			rv.fail(CheckRunEntries, "", "the seal counts %d entries before it, the bundle holds %d: entries are missing or added", want, len(rv.orch.entries)-1)
		default:
			rv.pass(CheckRunEntries, "", "all %d entries of the run before its seal are present", want)
		}
	}
	rv.checkDispatches(fired, succeeded)
}

// taskOf is T of the subject run/R/task/T.
func taskOf(subject string) string {
	if i := strings.Index(subject, "/task/"); i >= 0 {
		return subject[i+len("/task/"):]
	}
	return ""
}

func (rv *runVerifier) checkDispatches(fired, succeeded map[string]string) {
	// Entries of each dispatch, by kind.
	byDispatch := map[string]map[string]*EntryFields{}
	for i := range rv.disp.entries {
		e := &rv.disp.entries[i]
		d := strings.TrimPrefix(e.Subject, "dispatch/")
		if byDispatch[d] == nil {
			byDispatch[d] = map[string]*EntryFields{}
		}
		byDispatch[d][e.Kind] = e
	}
	var missing, extra []string
	for d := range fired {
		if byDispatch[d]["dispatch.accepted"] == nil {
			missing = append(missing, d)
		}
	}
	for d := range byDispatch {
		if _, ok := fired[d]; !ok {
			extra = append(extra, d)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	switch {
	case len(missing) > 0:
		rv.fail(CheckDispatches, "", "%d attempts have no dispatch entries in the bundle, e.g. %s", len(missing), missing[0])
	case len(extra) > 0:
		rv.fail(CheckDispatches, "", "dispatch %s is in the bundle but no task of the run fired it", extra[0])
	default:
		rv.pass(CheckDispatches, "", "every one of the run's %d attempts has its dispatch entries", len(fired))
	}
	manifests := map[string]*dispatchManifest{}
	for i, m := range rv.b.Dispatches.Manifests {
		item := strconv.Itoa(i)
		dm, err := rv.bind(m.Manifest, byDispatch)
		if err != nil {
			rv.fail(CheckBinding, item, "%v", err)
			continue
		}
		manifests[dm.Dispatch] = dm
		rv.pass(CheckBinding, item, "dispatch %s: %s, %s, products match its entries", dm.Dispatch, dm.Subagent, dm.State)
	}
	for d := range fired {
		if byDispatch[d]["dispatch.accepted"] != nil && manifests[d] == nil && terminal(byDispatch[d]) != nil {
			rv.fail(CheckBinding, d, "dispatch %s ended but its manifest is not in the bundle", d)
		}
	}
	ids := make([]string, 0, len(manifests))
	for d := range manifests {
		ids = append(ids, d)
	}
	sort.Strings(ids)
	for _, d := range ids {
		rv.provenance(manifests[d], manifests, succeeded)
	}
}

func terminal(kinds map[string]*EntryFields) *EntryFields {
	for _, k := range []string{"dispatch.finished", "dispatch.failed", "dispatch.needs_input", "dispatch.cancelled"} {
		if e := kinds[k]; e != nil {
			return e
		}
	}
	return nil
}

// bind parses a manifest and checks it against its dispatch's accepted and terminal entries.
func (rv *runVerifier) bind(raw []byte, byDispatch map[string]map[string]*EntryFields) (*dispatchManifest, error) {
	if len(raw) > maxManifestBytes {
		return nil, fmt.Errorf("manifest larger than %d bytes", maxManifestBytes)
	}
	var m dispatchManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("manifest does not parse: %v", err)
	}
	sum := sha256.Sum256(raw)
	m.digest = "sha256:" + hex.EncodeToString(sum[:])
	kinds := byDispatch[m.Dispatch]
	acc, end := kinds["dispatch.accepted"], terminal(kinds)
	switch {
	case acc == nil || end == nil:
		return nil, fmt.Errorf("dispatch %s has no accepted or no terminal entry in the bundle", truncate(m.Dispatch, 40))
	case end.Details["manifest"] != m.digest:
		return nil, fmt.Errorf("dispatch %s: its terminal entry records manifest %v, this one is %s", m.Dispatch, end.Details["manifest"], m.digest)
	case acc.Details["subagent"] != m.Subagent:
		return nil, fmt.Errorf("dispatch %s: accepted with subagent %v, the manifest says %s", m.Dispatch, acc.Details["subagent"], m.Subagent)
	case acc.Details["input_digest"] != m.InputDigest:
		return nil, fmt.Errorf("dispatch %s: accepted with input %v, the manifest says %s", m.Dispatch, acc.Details["input_digest"], m.InputDigest)
	case "dispatch."+m.State != end.Kind:
		return nil, fmt.Errorf("dispatch %s ended %s, the manifest says %s", m.Dispatch, end.Kind, m.State)
	}
	if p, ok := end.Details["patch_digest"]; ok && p != m.Products.Patch {
		return nil, fmt.Errorf("dispatch %s: its entry records patch %v, the manifest %s", m.Dispatch, p, m.Products.Patch)
	}
	if !equalStrings(anyStrings(acc.Details["envs"]), m.Envs) {
		return nil, fmt.Errorf("dispatch %s: accepted with env bundles %v, the manifest says %v", m.Dispatch, acc.Details["envs"], m.Envs)
	}
	return &m, nil
}

// provenance checks that each input of m is the recorded product of a succeeded task's
// dispatch in the same run.
func (rv *runVerifier) provenance(m *dispatchManifest, manifests map[string]*dispatchManifest, succeeded map[string]string) {
	for _, in := range m.Inputs {
		item := m.Dispatch + " " + in.Key
		up := manifests[in.FromDispatch]
		switch {
		case succeeded[in.FromDispatch] == "":
			rv.fail(CheckProvenance, item, "input %q comes from dispatch %s, which is not a succeeded task of this run", in.Key, truncate(in.FromDispatch, 40))
			continue
		case up == nil || up.State != "finished":
			rv.fail(CheckProvenance, item, "input %q: the manifest of upstream dispatch %s is missing or not finished", in.Key, in.FromDispatch)
			continue
		}
		if err := sameProduct(in.Select, in.Files, up); err != nil {
			rv.fail(CheckProvenance, item, "input %q from task %s: %v", in.Key, succeeded[in.FromDispatch], err)
			continue
		}
		rv.pass(CheckProvenance, item, "input %q is the %s of task %s (%s)", in.Key, in.Select, succeeded[in.FromDispatch], in.FromDispatch)
	}
}

// sameProduct checks the files an input mounted against the upstream manifest's products.
func sameProduct(sel string, files []manifestFile, up *dispatchManifest) error {
	switch {
	case sel == "patch":
		want := up.Products.Patch
		if want == "" {
			want = emptyDigest
		}
		if len(files) != 1 || files[0].Digest != want {
			return fmt.Errorf("mounted %v, the upstream patch is %s", files, want)
		}
	case sel == "outputs":
		got, want := map[string]string{}, map[string]string{}
		for _, f := range files {
			got[f.Path] = f.Digest
		}
		for _, f := range up.Products.Outputs {
			want[f.Path] = f.Digest
		}
		if len(got) != len(want) {
			return fmt.Errorf("mounted %d files, the upstream left %d outputs", len(got), len(want))
		}
		for p, d := range want {
			if got[p] != d {
				return fmt.Errorf("output %q is %s upstream, %s mounted", p, d, got[p])
			}
		}
	case strings.HasPrefix(sel, "output:"):
		path := strings.TrimPrefix(sel, "output:")
		var want string
		for _, f := range up.Products.Outputs {
			if f.Path == path {
				want = f.Digest
			}
		}
		if want == "" || len(files) != 1 || files[0].Digest != want {
			return fmt.Errorf("output %q is %q upstream, mounted %v", path, want, files)
		}
	default:
		return fmt.Errorf("unknown select %q", truncate(sel, 40))
	}
	return nil
}

func anyStrings(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// WriteRunBundle writes b as indented JSON.
func WriteRunBundle(w io.Writer, b *RunBundle) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	return enc.Encode(b)
}
