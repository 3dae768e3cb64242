package verify

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/strictjson"
)

// RunFormat is the version tag of the run bundles agora writes: one orchestrator run with
// every dispatch of it, both parts [Format] bundles whose signed selections name the run.
const RunFormat = "agora-run-bundle/v2"

// RunFormatV1 is the version tag of a run bundle written before selections were signed (its
// parts are [FormatV2]). It parses, and [VerifyRun] fails both parts' selection rows.
const RunFormatV1 = "agora-run-bundle/v1"

// Checks of a run bundle, after the rows of its two log bundles.
const (
	CheckRun         = "run"
	CheckRunEntries  = "run entries"
	CheckDispatches  = "run dispatches"
	CheckBinding     = "manifest binding"
	CheckProvenance  = "provenance"
	CheckVerdicts    = "verdicts"
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
	return json.Unmarshal(data, &head) == nil && (head.Format == RunFormat || head.Format == RunFormatV1)
}

// ParseRunBundle reads a run bundle strictly, like [ParseBundle]: size-capped, every key at
// every level exactly a field's name and given once, unknown fields refused.
func ParseRunBundle(r io.Reader) (*RunBundle, error) {
	var b RunBundle
	if err := parseStrict(r, &b); err != nil {
		return nil, err
	}
	partFormat := map[string]string{RunFormat: Format, RunFormatV1: FormatV2}[b.Format]
	if partFormat == "" {
		return nil, fmt.Errorf("%w: format %q, want %q (or the older %q)", ErrBundle, truncate(b.Format, 40), RunFormat, RunFormatV1)
	}
	for name, part := range map[string]*Bundle{"orch": b.Orch, "dispatches": b.Dispatches} {
		if part == nil {
			return nil, fmt.Errorf("%w: the run bundle has no %s part", ErrBundle, name)
		}
		if err := part.checkFormat(); err != nil {
			return nil, fmt.Errorf("%s part: %w", name, err)
		}
		if part.Format != partFormat {
			return nil, fmt.Errorf("%w: %s part: a %s bundle holds %s parts, not %q", ErrBundle, name, b.Format, partFormat, truncate(part.Format, 40))
		}
		if part.Entries == nil || part.Manifests == nil {
			return nil, fmt.Errorf("%w: %s part: entries and manifests must be lists", ErrBundle, name)
		}
	}
	return &b, nil
}

// VerifyRun checks both parts of a run bundle like [Verify] (their rows prefixed "orch " and
// "dispatches "), then the run: it is sealed and its entries are all there; both signed
// selections name it; every attempt has its accepted entry, exactly one terminal entry and
// the manifest that entry names; every manifest agrees with its dispatch's entries; and every
// input of a task is the product of a succeeded task of the same run.
func VerifyRun(b *RunBundle, opts Options) *Report {
	rep := &Report{Checks: []Result{}}
	var parts [2]*verifier
	for i, p := range []struct {
		name string
		b    *Bundle
	}{{"orch", b.Orch}, {"dispatches", b.Dispatches}} {
		v := newVerifier(p.b, opts)
		v.inRun = true
		v.checkLog()
		for _, r := range v.rep.Checks {
			r.Check = p.name + " " + r.Check
			rep.Checks = append(rep.Checks, r)
		}
		rep.KeySource = v.rep.KeySource
		if v.rep.TrustedTime != "" {
			rep.TrustedTime = v.rep.TrustedTime
		}
		if v.rep.TSARoot != "" && tsaRootRank[v.rep.TSARoot] >= tsaRootRank[rep.TSARoot] {
			rep.TSARoot = v.rep.TSARoot
		}
		parts[i] = v
	}
	rv := &runVerifier{b: b, rep: rep, orch: parts[0], disp: parts[1], redWork: map[string]string{}}
	rv.check()
	rep.OK = len(rep.Failed()) == 0
	rep.Tier = TierNone
	if rep.OK {
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

// tsaRootRank orders TSA root sources from strongest to weakest.
var tsaRootRank = map[string]int{"": -1, TSARootGiven: 0, TSARootSystem: 1, TSARootBundle: 2}

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
	// redWork maps a dispatch whose verify gate was red and whose work the run handed to a
	// fix (orch.task.rejected) to its task.
	redWork map[string]string
	// attempts are the dispatches part's entries by dispatch.
	attempts map[string]*attempt
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
		Dir          string         `json:"dir"`
		Select       string         `json:"select"`
		FromDispatch string         `json:"from_dispatch"`
		Files        []manifestFile `json:"files"`
	} `json:"inputs"`
	Products struct {
		Patch   string         `json:"patch"`
		Outputs []manifestFile `json:"outputs"`
		// Final is the digest of the final answer the worker vouched for, "" without one.
		Final string `json:"final"`
	} `json:"products"`
	// Verdict is the digest of the dispatch's verify gate verdict, "" without one.
	Verdict string `json:"verdict"`
	digest  string
}

type manifestFile struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

func (rv *runVerifier) check() {
	id := rv.b.Run.ID
	runSubject := entry.Run(id)
	if subs := rv.b.Orch.Selection.Subjects; len(subs) != 1 || subs[0] != runSubject {
		rv.fail(CheckRun, "", "the orch part selects %q, want exactly [%q]", subs, runSubject)
		return
	}
	// The signed selections name the run, so a part exported for another run (or none)
	// cannot stand in.
	if rv.b.Format == RunFormat {
		for _, p := range []struct {
			name string
			b    *Bundle
		}{{"orch", rv.b.Orch}, {"dispatches", rv.b.Dispatches}} {
			if p.b.Selection.Run != id {
				rv.fail(CheckRun, "", "the %s part was selected for run %q, the bundle is of run %q", p.name, truncate(p.b.Selection.Run, 40), truncate(id, 40))
				return
			}
		}
	}
	// The run: submitted with this name and plan, sealed, and every entry of it present.
	var submitted, sealed *EntryFields
	fired := map[string]string{}     // dispatch id -> task
	succeeded := map[string]string{} // dispatch id -> task
	for i := range rv.orch.entries {
		e := &rv.orch.entries[i]
		switch e.Kind {
		case entry.RunSubmitted:
			submitted = e
		case entry.RunSealed:
			sealed = e
		case entry.TaskFired:
			if d, ok := e.Details[entry.KeyDispatchID].(string); ok {
				fired[d] = taskOf(e.Subject)
			}
		case entry.TaskSucceeded, entry.TaskProduced:
			// produced: the attempt finished and its products were handed to reviewers
			// (the task's success waits for their quorum).
			if d, ok := e.Details[entry.KeyDispatchID].(string); ok {
				succeeded[d] = taskOf(e.Subject)
			}
		case entry.TaskRejected:
			// Red work (its verify gate failed) handed to the task's fix loop: its patch is
			// the fix's input.
			if d, ok := e.Details[entry.KeyDispatchID].(string); ok && e.Details[entry.KeyReason] == lifecycle.ReasonVerifyFailed {
				rv.redWork[d] = taskOf(e.Subject)
			}
		}
	}
	switch {
	case submitted == nil:
		rv.fail(CheckRun, "", "no orch.run.submitted entry for run %s", id)
	case submitted.Details[entry.KeyRunName] != rv.b.Run.Name || submitted.Details[entry.KeyPlanDigest] != rv.b.Run.PlanDigest:
		rv.fail(CheckRun, "", "run %s was submitted as %v with plan %v, the bundle says %s with plan %s", id,
			submitted.Details[entry.KeyRunName], submitted.Details[entry.KeyPlanDigest], rv.b.Run.Name, rv.b.Run.PlanDigest)
	case sealed == nil:
		rv.fail(CheckRun, "", "run %s is not sealed in the bundle: later entries could still change it", id)
	default:
		rv.pass(CheckRun, "", "run %s (%s), plan %s, sealed %v", id, rv.b.Run.Name, rv.b.Run.PlanDigest, sealed.Details[entry.KeyState])
	}
	if sealed != nil {
		want, err := strconv.Atoi(fmt.Sprint(sealed.Details[entry.KeyEntries]))
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

// terminalKinds are the entries that end a dispatch; a closed attempt has exactly one.
var terminalKinds = map[string]bool{entry.DispatchFinished: true, entry.DispatchFailed: true, entry.DispatchNeedsInput: true, entry.DispatchCancelled: true}

// attempt is what the dispatches part holds of one dispatch.
type attempt struct {
	accepted, terminal, verified []*EntryFields
}

func (rv *runVerifier) checkDispatches(fired, succeeded map[string]string) {
	attempts := map[string]*attempt{}
	rv.attempts = attempts
	for i := range rv.disp.entries {
		e := &rv.disp.entries[i]
		d := strings.TrimPrefix(e.Subject, "dispatch/")
		a := attempts[d]
		if a == nil {
			a = &attempt{}
			attempts[d] = a
		}
		switch {
		case e.Kind == entry.DispatchAccepted:
			a.accepted = append(a.accepted, e)
		case terminalKinds[e.Kind]:
			a.terminal = append(a.terminal, e)
		case e.Kind == entry.DispatchVerified:
			a.verified = append(a.verified, e)
		}
	}
	carried := map[string]bool{}
	for _, m := range rv.b.Dispatches.Manifests {
		sum := sha256.Sum256(m.Manifest)
		carried["sha256:"+hex.EncodeToString(sum[:])] = true
	}
	selected := map[string]bool{}
	for _, s := range rv.b.Dispatches.Selection.Subjects {
		selected[strings.TrimPrefix(s, "dispatch/")] = true
	}
	ids := map[string]bool{}
	for _, set := range []map[string]bool{selected, keys(fired), keys(attempts)} {
		for d := range set {
			ids[d] = true
		}
	}
	ok := true
	for _, d := range slices.Sorted(maps.Keys(ids)) {
		if problem := attemptProblem(d, fired, succeeded, selected, attempts[d], carried); problem != "" {
			ok = false
			rv.fail(CheckDispatches, truncate(d, 40), "dispatch %s: %s", truncate(d, 40), problem)
		}
	}
	if ok {
		rv.pass(CheckDispatches, "", "every one of the run's %d attempts has its dispatch entries: accepted, exactly one terminal entry and the manifest it names", len(fired))
	}
	manifests := map[string]*dispatchManifest{}
	for i, m := range rv.b.Dispatches.Manifests {
		item := strconv.Itoa(i)
		dm, err := rv.bind(m.Manifest, attempts)
		if err != nil {
			rv.fail(CheckBinding, item, "%v", err)
			continue
		}
		manifests[dm.Dispatch] = dm
		rv.pass(CheckBinding, item, "dispatch %s: %s, %s, products match its entries", dm.Dispatch, dm.Subagent, dm.State)
	}
	for _, d := range slices.Sorted(maps.Keys(manifests)) {
		rv.provenance(manifests[d], manifests, succeeded)
	}
	rv.checkVerdicts(fired, attempts)
}

// attemptProblem says what is wrong with dispatch d's part of the bundle, or "" when it was
// fired by the run, selected by the export, accepted once and ended once, and the manifest
// its end names is carried. A sealed run's attempts are all closed: one with no terminal
// entry had its end removed (or was exported while open, which agora orch audit refuses).
func attemptProblem(d string, fired, succeeded map[string]string, selected map[string]bool,
	a *attempt, carried map[string]bool) string {
	_, wasFired := fired[d]
	_, didSucceed := succeeded[d]
	switch {
	case !wasFired && a != nil:
		return "its entries are in the bundle, but no task of the run fired it"
	case !wasFired:
		return "the export selected it, but no task of the run fired it"
	case !selected[d]:
		return fmt.Sprintf("task %s fired it, but the export did not select it", fired[d])
	case a == nil:
		return fmt.Sprintf("task %s fired it, but the bundle holds none of its entries", fired[d])
	case len(a.accepted) != 1:
		return fmt.Sprintf("%d dispatch.accepted entries, want exactly 1", len(a.accepted))
	case len(a.terminal) == 0:
		return "no terminal entry (dispatch.finished, failed, needs_input or cancelled): its end was removed, or it was still open, which a sealed run's attempt never is"
	case len(a.terminal) > 1:
		return fmt.Sprintf("%d terminal entries (%s at %d, %s at %d), want exactly 1",
			len(a.terminal), a.terminal[0].Kind, a.terminal[0].Seq, a.terminal[1].Kind, a.terminal[1].Seq)
	}
	end := a.terminal[0]
	ref, _ := end.Details[entry.KeyManifest].(string)
	switch {
	case didSucceed && end.Kind != entry.DispatchFinished:
		return fmt.Sprintf("orch.db records task %s succeeded with it, but it ended %s", succeeded[d], end.Kind)
	case ref == "":
		return fmt.Sprintf("its %s entry (%d) names no manifest", end.Kind, end.Seq)
	case !carried[ref]:
		return fmt.Sprintf("its %s entry (%d) names manifest %s, which the bundle does not carry", end.Kind, end.Seq, truncate(ref, 80))
	}
	return verdictProblem(a)
}

// verdictProblem says what is wrong with a closed attempt's verify gate entries, or "": the
// verdict its end names is the one dispatch.verified entry before it, a dispatch.verified
// entry is named by its end, and a dispatch accepted with a gate does not finish without one.
func verdictProblem(a *attempt) string {
	end := a.terminal[0]
	want, _ := end.Details[entry.KeyVerdict].(string)
	_, gated := a.accepted[0].Details[entry.KeyVerify]
	switch {
	case want == "" && len(a.verified) > 0:
		return fmt.Sprintf("a dispatch.verified entry (%d) that its %s entry (%d) does not name", a.verified[0].Seq, end.Kind, end.Seq)
	case want == "" && gated && end.Kind == entry.DispatchFinished:
		return fmt.Sprintf("accepted with a verify gate, it finished (%d) without a verdict", end.Seq)
	case want == "":
		return ""
	case len(a.verified) == 0:
		return fmt.Sprintf("its %s entry (%d) names verdict %s, but the bundle holds no dispatch.verified entry: it was removed", end.Kind, end.Seq, truncate(want, 80))
	case len(a.verified) > 1:
		return fmt.Sprintf("%d dispatch.verified entries, want exactly 1", len(a.verified))
	case a.verified[0].Details[entry.KeyVerdict] != want:
		return fmt.Sprintf("its dispatch.verified entry (%d) records verdict %v, its end names %s", a.verified[0].Seq, a.verified[0].Details[entry.KeyVerdict], truncate(want, 80))
	case a.verified[0].Seq > end.Seq:
		return fmt.Sprintf("its dispatch.verified entry (%d) comes after its end (%d)", a.verified[0].Seq, end.Seq)
	}
	return ""
}

func keys[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// bind parses a manifest and checks it against its dispatch's accepted and terminal entries.
func (rv *runVerifier) bind(raw []byte, attempts map[string]*attempt) (*dispatchManifest, error) {
	if len(raw) > maxManifestBytes {
		// A limit of this verifier, not evidence of tampering: agora caps what a dispatch
		// records (output names included) so an honest manifest stays far below it.
		return nil, fmt.Errorf("manifest is %d bytes, over this verifier's limit of %d bytes, so it was not checked", len(raw), maxManifestBytes)
	}
	// One reading for every reader: no key twice, even in another case.
	if err := strictjson.CheckObject(raw); err != nil {
		return nil, fmt.Errorf("manifest does not parse: %v", err)
	}
	var m dispatchManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("manifest does not parse: %v", err)
	}
	sum := sha256.Sum256(raw)
	m.digest = "sha256:" + hex.EncodeToString(sum[:])
	a := attempts[m.Dispatch]
	if a == nil || len(a.accepted) != 1 || len(a.terminal) != 1 {
		return nil, fmt.Errorf("dispatch %s has not exactly one accepted and one terminal entry in the bundle", truncate(m.Dispatch, 40))
	}
	acc, end := a.accepted[0], a.terminal[0]
	switch {
	case end.Details[entry.KeyManifest] != m.digest:
		return nil, fmt.Errorf("dispatch %s: its terminal entry records manifest %v, this one is %s", m.Dispatch, end.Details[entry.KeyManifest], m.digest)
	case acc.Details[entry.KeySubagent] != m.Subagent:
		return nil, fmt.Errorf("dispatch %s: accepted with subagent %v, the manifest says %s", m.Dispatch, acc.Details[entry.KeySubagent], m.Subagent)
	case acc.Details[entry.KeyInputDigest] != m.InputDigest:
		return nil, fmt.Errorf("dispatch %s: accepted with input %v, the manifest says %s", m.Dispatch, acc.Details[entry.KeyInputDigest], m.InputDigest)
	case entry.DispatchState(m.State) != end.Kind:
		return nil, fmt.Errorf("dispatch %s ended %s, the manifest says %s", m.Dispatch, end.Kind, m.State)
	}
	if p, ok := end.Details[entry.KeyPatchDigest]; ok && p != m.Products.Patch {
		return nil, fmt.Errorf("dispatch %s: its entry records patch %v, the manifest %s", m.Dispatch, p, m.Products.Patch)
	}
	if f, _ := end.Details[entry.KeyFinalDigest].(string); f != m.Products.Final {
		return nil, fmt.Errorf("dispatch %s: its entry records final answer %q, the manifest %q", m.Dispatch, f, m.Products.Final)
	}
	if v, _ := end.Details[entry.KeyVerdict].(string); v != m.Verdict {
		return nil, fmt.Errorf("dispatch %s: its entry records verdict %q, the manifest %q", m.Dispatch, v, m.Verdict)
	}
	if !equalStrings(anyStrings(acc.Details[entry.KeyEnvs]), m.Envs) {
		return nil, fmt.Errorf("dispatch %s: accepted with env bundles %v, the manifest says %v", m.Dispatch, acc.Details[entry.KeyEnvs], m.Envs)
	}
	return &m, nil
}

// provenance checks that each input of m is the recorded product of a succeeded task's
// dispatch in the same run.
func (rv *runVerifier) provenance(m *dispatchManifest, manifests map[string]*dispatchManifest, succeeded map[string]string) {
	for _, in := range m.Inputs {
		item := m.Dispatch + " " + in.Key
		if in.Dir != "" {
			item += "/" + in.Dir
		}
		up := manifests[in.FromDispatch]
		task, red := succeeded[in.FromDispatch], false
		if task == "" {
			task = rv.redWork[in.FromDispatch]
			red = task != ""
		}
		switch {
		case task == "":
			rv.fail(CheckProvenance, item, "input %q comes from dispatch %s, which is not a succeeded task of this run", in.Key, truncate(in.FromDispatch, 40))
			continue
		case up == nil || (!red && up.State != lifecycle.DispatchFinished):
			rv.fail(CheckProvenance, item, "input %q: the manifest of upstream dispatch %s is missing or not finished", in.Key, in.FromDispatch)
			continue
		case red && (up.State != lifecycle.DispatchFailed || (in.Select != "patch" && in.Select != "verify")):
			rv.fail(CheckProvenance, item, "input %q: dispatch %s's work was rejected; only its patch and verdict go to its fix, not its %s (its manifest says %s)",
				in.Key, in.FromDispatch, truncate(in.Select, 40), up.State)
			continue
		}
		if in.Select == "verify" {
			if err := rv.sameVerdict(in.Files, up); err != nil {
				rv.fail(CheckProvenance, item, "input %q from task %s: %v", in.Key, task, err)
				continue
			}
		} else if err := sameProduct(in.Select, in.Files, up); err != nil {
			rv.fail(CheckProvenance, item, "input %q from task %s: %v", in.Key, task, err)
			continue
		}
		rv.pass(CheckProvenance, item, "input %q is the %s of task %s (%s)", in.Key, in.Select, task, in.FromDispatch)
	}
}

// sameProduct checks the files an input mounted against the upstream manifest's products.
func sameProduct(sel string, files []manifestFile, up *dispatchManifest) error {
	switch {
	case sel == "patch":
		want := cmp.Or(up.Products.Patch, emptyDigest)
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

// WriteRunBundle writes b as indented JSON. A run bundle is read whole, so one over
// [MaxBundleSize] is refused here ([ErrTooLarge]), not written for verify to refuse.
func WriteRunBundle(w io.Writer, b *RunBundle) error {
	lw := &limitedWriter{w: w, left: MaxBundleSize}
	if err := writeRunBundle(lw, b); err != nil {
		if lw.over {
			return fmt.Errorf("%w: the run bundle is over %d bytes, the most agora verify reads of a run bundle, which it reads whole", ErrTooLarge, MaxBundleSize)
		}
		return err
	}
	return nil
}

// limitedWriter passes at most left bytes to w, then fails.
type limitedWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		l.over = true
		return 0, ErrTooLarge
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

func writeRunBundle(w io.Writer, b *RunBundle) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	return enc.Encode(b)
}

// sameVerdict checks a verify input's two files against the upstream's verdict: verify.json
// is the verdict its manifest names, output.txt the output its dispatch.verified entry hashed.
func (rv *runVerifier) sameVerdict(files []manifestFile, up *dispatchManifest) error {
	if up.Verdict == "" {
		return fmt.Errorf("the upstream dispatch has no verdict")
	}
	var outputSHA string
	if a := rv.attempts[up.Dispatch]; a != nil && len(a.verified) == 1 && a.verified[0].Details[entry.KeyVerdict] == up.Verdict {
		outputSHA, _ = a.verified[0].Details[entry.KeyOutputSHA256].(string)
	}
	if outputSHA == "" {
		return fmt.Errorf("the upstream dispatch's dispatch.verified entry of verdict %s is not in the bundle", truncate(up.Verdict, 80))
	}
	want := map[string]string{"verify.json": up.Verdict, "output.txt": "sha256:" + outputSHA}
	if len(files) != len(want) {
		return fmt.Errorf("mounted %d files, a verdict is 2 (verify.json, output.txt)", len(files))
	}
	for _, f := range files {
		if want[f.Path] == "" || f.Digest != want[f.Path] {
			return fmt.Errorf("mounted %s as %s, the upstream verdict's is %s", truncate(f.Path, 40), truncate(f.Digest, 80), want[f.Path])
		}
	}
	return nil
}
