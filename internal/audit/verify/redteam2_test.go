package verify_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// failedRows names the failed rows of a report as "check item".
func failedRows(r *verify.Report) []string {
	out := []string{}
	for _, c := range r.Failed() {
		out = append(out, strings.TrimSpace(c.Check+" "+c.Item))
	}
	return out
}

// TestVerify_RunPartAloneIsRefused: a downgrade from a run bundle to a plain bundle hid every
// dispatch's products.
//
// Attack: take the `dispatches` part of a real run bundle (testdata/run-bundle-v2.json, an
// `agora orch audit` export), delete every manifest from it and hand it over on its own: it
// is an ordinary `agora-audit-bundle/v3` object, so `agora verify` checks it as a plain
// bundle. The signed selection still matches (manifests are not in the signed text), and the
// `manifest closure` row, the only one that requires the manifests the entries name, ran
// only "when manifests are present": with none, no row asked for them. None of the run checks
// (exactly one terminal entry per attempt, manifest binding, provenance) ran either, although
// the signed selection names the run (`selection.run`).
//
// Impact: a verifying bundle of the run's dispatches that carried none of their manifests:
// the products (patch and output digests) and upstream inputs of every task were gone, and
// `agora verify` exited 0 at tier tamper-detecting.
//
// Now: plain [verify.Verify] fails the selection row of any bundle whose signed selection
// names a run (it is a part, and only [verify.VerifyRun] checks the whole), and a part of a
// run checks the manifest closure even when it carries no manifest at all, so both the
// stripped part alone and a run bundle whose part was stripped fail and say why.
func TestVerify_RunPartAloneIsRefused(t *testing.T) {
	data, opts := readRunGolden(t)
	rb, err := verify.ParseRunBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	part := rb.Dispatches
	if part.Selection.Run == "" || len(part.Manifests) == 0 {
		t.Fatalf("golden dispatches part: run %q, %d manifests", part.Selection.Run, len(part.Manifests))
	}
	reparse := func(t *testing.T, b *verify.Bundle) *verify.Bundle {
		t.Helper()
		var buf bytes.Buffer
		if err := verify.WriteBundle(&buf, b); err != nil {
			t.Fatal(err)
		}
		// What `agora verify FILE` does: not a run bundle, so ParseBundle and Verify.
		if verify.IsRunBundle(buf.Bytes()) {
			t.Fatal("the extracted part reads as a run bundle")
		}
		out, err := verify.ParseBundle(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("the extracted part does not parse: %v", err)
		}
		return out
	}

	t.Run("StrippedPartAlone", func(t *testing.T) {
		stripped := *part
		stripped.Manifests = []verify.Manifest{}
		rep := verify.Verify(reparse(t, &stripped), opts)
		if rep.OK || rep.Tier != verify.TierNone {
			t.Errorf("got ok %v tier %s, want a failure at tier none", rep.OK, rep.Tier)
		}
		if diff := cmp.Diff([]string{"selection", "manifest closure"}, failedRows(rep)); diff != "" {
			t.Errorf("failed rows (-want +got):\n%s", diff)
		}
		for _, c := range rep.Failed() {
			want := map[string]string{
				verify.CheckSelection: "part of run " + part.Selection.Run,
				verify.CheckManifest:  "which the bundle does not carry (5 missing)",
			}[c.Check]
			if !strings.Contains(c.Detail, want) {
				t.Errorf("%s row %q, want it to contain %q", c.Check, c.Detail, want)
			}
		}
	})
	t.Run("IntactPartAlone", func(t *testing.T) {
		rep := verify.Verify(reparse(t, part), opts)
		if diff := cmp.Diff([]string{"selection"}, failedRows(rep)); diff != "" || rep.Tier != verify.TierNone {
			t.Errorf("tier %s, failed rows (-want +got):\n%s", rep.Tier, diff)
		}
	})
	t.Run("StrippedInsideRunBundle", func(t *testing.T) {
		rb, err := verify.ParseRunBundle(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		rb.Dispatches.Manifests = []verify.Manifest{}
		rep := verify.VerifyRun(rb, opts)
		rows := failedRows(rep)
		if rep.OK || len(rows) == 0 || rows[0] != "dispatches manifest closure" {
			t.Errorf("got ok %v, failed rows %q; want the dispatches part's manifest closure to fail first", rep.OK, rows)
		}
	})
}

// TestVerify_CaseVariantKeysRefused: `agora verify` read a different bundle from the one
// every case-sensitive JSON reader sees.
//
// Attack: docs/audit-bundle.md says readers MUST refuse unknown fields, and ParseRunBundle /
// ParseBundle used DisallowUnknownFields. But encoding/json matches keys case-insensitively,
// and of two keys naming one field keeps the last. So a run bundle could carry a forged part
// under the documented key "dispatches" (here: a task's manifest replaced by one with other
// products) and the real one under "Dispatches" after it. agora verify decoded "Dispatches"
// (the last), found every signature and proof intact and exited 0; jq, Python, JavaScript
// and any other reader of `.dispatches` see the forged part, which no check ever looked at.
// The same worked for every key of a plain bundle ("Entries", "Manifests", "Selection", ...).
//
// Impact: an auditor who runs `agora verify` (pass) and then reads the bundle with a standard
// tool (jq .dispatches.manifests, a dashboard, a SIEM import) trusts content nobody verified.
//
// Now: bundles are read with internal/strictjson, which refuses two keys equal under case
// folding and any key that is not a field's exact name, at every level, so the attack
// bundle and every lone case variant are a malformed bundle (the one failed row "bundle").
func TestVerify_CaseVariantKeysRefused(t *testing.T) {
	data, _ := readRunGolden(t)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	// The forged part: the real one with one manifest's patch digest replaced.
	var forged map[string]any
	if err := json.Unmarshal(top["dispatches"], &forged); err != nil {
		t.Fatal(err)
	}
	ms := forged["manifests"].([]any)
	const fake = "sha256:0000000000000000000000000000000000000000000000000000000000000bad"
	ms[0].(map[string]any)["manifest"] = []byte(`{"dispatch":"forged","products":{"patch":"` + fake + `"}}`)
	forgedJSON, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	// Written by hand to control key order: the forged part under "dispatches", the real
	// one last under "Dispatches".
	tampered := []byte(`{"format":` + string(top["format"]) + `,"run":` + string(top["run"]) + `,"orch":` + string(top["orch"]) +
		`,"dispatches":` + string(forgedJSON) + `,"Dispatches":` + string(top["dispatches"]) + `}`)
	if !verify.IsRunBundle(tampered) {
		t.Fatal("not read as a run bundle")
	}
	if _, err := verify.ParseRunBundle(bytes.NewReader(tampered)); !errors.Is(err, verify.ErrBundle) || !strings.Contains(err.Error(), `duplicate key "Dispatches"`) {
		t.Errorf("the attack bundle: got %v, want ErrBundle naming the duplicate key", err)
	}

	plain, _ := readGolden(t)
	tests := []struct {
		name string
		run  bool // data is the run bundle, else the plain one
		old  string
		new  string
		want string
	}{
		{"LonePartKey", true, `"dispatches": {`, `"Dispatches": {`, `unknown field "Dispatches" (keys are case-sensitive: the field is "dispatches")`},
		{"RunInfo", true, `"plan_digest"`, `"Plan_Digest"`, `the field is "plan_digest"`},
		{"PartSelection", true, `"from_index"`, `"FROM_INDEX"`, `at .orch.selection`},
		{"EntryField", true, `"leaf_hash"`, `"leaf_Hash"`, `at .orch.entries[0]`},
		{"KelvinSign", true, `"key"`, `"\u212Aey"`, `the field is "key"`},
		{"DuplicateExactKey", true, `"count": 14,`, `"count": 14, "count": 13,`, `duplicate key "count"`},
		{"UnknownNested", true, `"leaf_hash"`, `"leaf_hash2": "", "leaf_hash"`, `unknown field "leaf_hash2" at .orch.entries[0]`},
		{"PlainTopLevel", false, `"manifests": [`, `"Manifests": [`, `the field is "manifests"`},
		{"PlainEvidence", false, `"checkpoint_sha256"`, `"Checkpoint_sha256"`, `at .anchored.evidence[0]`},
		{"PlainManifestItem", false, `"manifest": "`, `"MANIFEST": "`, `at .manifests[0]`},
		{"PlainDuplicateFolded", false, `"key"`, `"ORIGIN": "x", "key"`, `duplicate key "ORIGIN"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := plain
			if tt.run {
				src = data
			}
			in := bytes.Replace(src, []byte(tt.old), []byte(tt.new), 1)
			if bytes.Equal(in, src) {
				t.Fatalf("fixture: %q not found", tt.old)
			}
			var err error
			if tt.run {
				_, err = verify.ParseRunBundle(bytes.NewReader(in))
			} else {
				_, err = verify.ParseBundle(bytes.NewReader(in))
			}
			if !errors.Is(err, verify.ErrBundle) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want ErrBundle containing %q", err, tt.want)
			}
		})
	}
}

// TestVerify_CommandAnchorDoesNotRaiseTier: anyone could raise any bundle to the strongest
// tier, tamper-evident, without the key.
//
// Attack: `anchored` and its `evidence` are covered by no signature, and a `command` evidence
// row passed on the checkpoint's SHA-256 alone (its receipt "must be confirmed with that
// store", but the row passed and set the tier). So take a real run bundle that no external
// anchor ever saw (testdata/run-bundle-v2.json, tier tamper-detecting), and give each part an
// `anchored` object naming its own signed checkpoint (same size: an empty consistency proof)
// with one made-up evidence {type: command, name: command:/usr/local/bin/s3-object-lock,
// checkpoint_sha256: sha256(checkpoint), receipt: anything}.
//
// Impact: `agora verify` printed tier tamper-evident, whose whole meaning is "the operator
// who holds keys/audit.key and the storage could not have rewritten this": exactly the party
// who can make this edit (after rewriting the log and re-signing it) got the tier that is
// meant to exclude them.
//
// Now: a command receipt is a claim the verifier cannot check offline; its row says so and
// raises no tier. Only a copy of the anchored checkpoint that the auditor fetched from the
// external store and passed in ([verify.Options.AnchoredCopies], `--anchored-checkpoint`)
// reaches tamper-evident, and only when it is byte for byte the bundle's anchored checkpoint.
func TestVerify_CommandAnchorDoesNotRaiseTier(t *testing.T) {
	data, opts := readRunGolden(t)
	rb, err := verify.ParseRunBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify.VerifyRun(rb, opts); !rep.OK || rep.Tier != verify.TierTamperDetecting {
		t.Fatalf("golden: ok %v tier %s", rep.OK, rep.Tier)
	}
	for _, part := range []*verify.Bundle{rb.Orch, rb.Dispatches} {
		sum := sha256.Sum256(part.Checkpoint)
		part.Anchored = &verify.Anchored{
			Checkpoint:       part.Checkpoint,
			ConsistencyProof: [][]byte{},
			Evidence: []verify.Evidence{{
				Type: verify.AnchorCommand, Name: "command:/usr/local/bin/s3-object-lock",
				At: time.Now().UTC(), CheckpointSHA256: sum[:],
				Receipt: []byte("VersionId: 3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY (never uploaded)"),
			}},
		}
	}
	var buf bytes.Buffer
	if err := verify.WriteRunBundle(&buf, rb); err != nil {
		t.Fatal(err)
	}
	parsed, err := verify.ParseRunBundle(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.VerifyRun(parsed, opts)
	if !rep.OK || rep.Tier != verify.TierTamperDetecting {
		t.Errorf("forged command receipt: got ok %v tier %s (failed %q), want a pass at %s",
			rep.OK, rep.Tier, failedRows(rep), verify.TierTamperDetecting)
	}
	var anchorRows int
	for _, c := range rep.Checks {
		if strings.HasSuffix(c.Check, " "+verify.CheckAnchor) {
			anchorRows++
			if !strings.Contains(c.Detail, "claimed, not verifiable offline") {
				t.Errorf("%s %s: %q, want it to say the receipt is claimed, not verifiable offline", c.Check, c.Item, c.Detail)
			}
		}
	}
	if anchorRows != 2 {
		t.Errorf("%d command anchor rows, want 2", anchorRows)
	}
}

// TestVerify_AnchoredCopy: tamper-evident needs the auditor's own copy of the anchored
// checkpoint, and a copy that differs fails its row.
func TestVerify_AnchoredCopy(t *testing.T) {
	data, opts := readGolden(t)
	b, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Clone(b.Anchored.Checkpoint)
	other[len(other)-3] ^= 1 // a byte of the signature
	tests := []struct {
		name   string
		copies [][]byte
		tier   string
		failed []string
		detail string
	}{
		{"NoCopy", nil, verify.TierTrustedTime, []string{}, ""},
		{"SameBytes", [][]byte{b.Checkpoint, bytes.Clone(b.Anchored.Checkpoint)}, verify.TierTamperEvident, []string{},
			"equals a copy the auditor supplied"},
		{"OtherBytes", [][]byte{other}, verify.TierNone, []string{"anchored copy"},
			"none of the 1 given copies is the bundle's anchored checkpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			o.AnchoredCopies = tt.copies
			rep := verify.Verify(b, o)
			if rep.Tier != tt.tier {
				t.Errorf("tier %s, want %s", rep.Tier, tt.tier)
			}
			if diff := cmp.Diff(tt.failed, failedRows(rep)); diff != "" {
				t.Errorf("failed rows (-want +got):\n%s", diff)
			}
			var found bool
			for _, c := range rep.Checks {
				if c.Check == verify.CheckAnchoredCopy {
					found = true
					if !strings.Contains(c.Detail, tt.detail) {
						t.Errorf("anchored copy row %q, want it to contain %q", c.Detail, tt.detail)
					}
				}
			}
			if found != (tt.copies != nil) {
				t.Errorf("anchored copy row present %v, want %v", found, tt.copies != nil)
			}
		})
	}
}

// TestVerify_TSARootSource: the report says which roots the trusted time rests on.
func TestVerify_TSARootSource(t *testing.T) {
	data, opts := readGolden(t)
	b, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify.Verify(b, opts); rep.Tier != verify.TierTrustedTime || rep.TSARoot != verify.TSARootGiven {
		t.Errorf("with TSARoots: tier %s root %q, want %s from %q", rep.Tier, rep.TSARoot, verify.TierTrustedTime, verify.TSARootGiven)
	}
	opts.TSARoots = nil
	if rep := verify.Verify(b, opts); rep.Tier != verify.TierTrustedTime || rep.TSARoot != verify.TSARootBundle {
		t.Errorf("without TSARoots: tier %s root %q, want %s from %q", rep.Tier, rep.TSARoot, verify.TierTrustedTime, verify.TSARootBundle)
	}
}

// TestVerifyRun_ManifestOverLimit: a manifest over the verifier's size limit is reported as
// such, not as a forgery.
func TestVerifyRun_ManifestOverLimit(t *testing.T) {
	data, opts := readRunGolden(t)
	b, err := verify.ParseRunBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b.Dispatches.Manifests[0].Manifest = append([]byte(`{"pad":"`), append(bytes.Repeat([]byte("x"), 1<<20), `"}`...)...)
	rep := verify.VerifyRun(b, opts)
	for _, c := range rep.Failed() {
		if c.Check == verify.CheckBinding && c.Item == "0" {
			if !strings.Contains(c.Detail, "over this verifier's limit of 1048576 bytes") {
				t.Errorf("manifest binding 0: %q, want it to name the verifier's limit", c.Detail)
			}
			return
		}
	}
	t.Errorf("no failed manifest binding 0 row: %q", failedRows(rep))
}
