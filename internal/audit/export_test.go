package audit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
)

var testManifest = []byte(`{"catalog":{"subagent":"sha256:` + strings.Repeat("ab", 32) + `"},"inputs":[]}`)

type exported struct {
	f      *fixture
	tsa    *audittest.TSA
	full   *verify.Bundle // entries 0..15 against checkpoint 16, which is anchored
	older  *verify.Bundle // catalog.* entries 0..9 against checkpoint 10, consistent with 16
	names  map[string]string
	opts   verify.Options
	signer func(verify.Checkpoint) []byte
}

// exportFixture builds a real log with three anchors, two checkpoints and a dispatch entry
// that records a manifest, and exports it twice.
func exportFixture(t *testing.T) *exported {
	t.Helper()
	dir := t.TempDir()
	tsa := audittest.NewTSA(t)
	tsaAnchor, err := anchor.NewRFC3161(tsa.URL, tsa.CAPEM, audittest.LoopbackPolicy)
	if err != nil {
		t.Fatal(err)
	}
	cmdAnchor, err := anchor.NewCommand([]string{"/bin/sh", "-c", "cat >/dev/null; echo object-version-7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fileAnchor := anchor.NewFile(filepath.Join(dir, "anchor.jsonl"), nil)
	f := newFixture(t, fileAnchor, tsaAnchor, cmdAnchor)
	appendN(t, f.db, 0, 10)
	f.checkpoint(t)
	sum := sha256.Sum256(testManifest)
	for i := 10; i < 16; i++ {
		details := map[string]any{"n": i}
		if i == 12 {
			details["manifest"] = "sha256:" + hex.EncodeToString(sum[:])
		}
		appendEntry(t, f, audit.Entry{Actor: "fixer@sha256:01", Kind: "dispatch.start", Subject: fmt.Sprintf("d%d", i), Details: details})
	}
	if err := f.checkpoint(t).Err(); err != nil {
		t.Fatal(err)
	}
	e := &exported{f: f, tsa: tsa, opts: verify.Options{Key: f.vkey, TSARoots: tsa.Pool},
		names: map[string]string{"file": fileAnchor.Name(), "rfc3161": tsaAnchor.Name(), "command": cmdAnchor.Name()}}
	if e.full, err = f.cp.Export(t.Context(), audit.Selection{}); err != nil {
		t.Fatal(err)
	}
	e.full.Manifests = []verify.Manifest{{Manifest: testManifest}}
	if e.older, err = f.cp.Export(t.Context(), audit.Selection{Kind: "catalog.*"}); err != nil {
		t.Fatal(err)
	}
	if len(e.older.Anchored.ConsistencyProof) == 0 {
		t.Fatal("fixture: the older bundle has no consistency proof to tamper with")
	}
	e.signer = func(c verify.Checkpoint) []byte {
		b, err := verify.SignCheckpoint(c, f.signer)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return e
}

func appendEntry(tb testing.TB, f *fixture, e audit.Entry) {
	tb.Helper()
	ctx := context.Background()
	err := f.db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := audit.New(nil).Append(ctx, tx, e)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// roundTrip copies b through its wire format, as a file would.
func roundTrip(tb testing.TB, b *verify.Bundle) *verify.Bundle {
	tb.Helper()
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, b); err != nil {
		tb.Fatal(err)
	}
	out, err := verify.ParseBundle(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// verifyBoth verifies b as WriteBundle writes it with the whole-file verifier and with the
// streaming one, and returns the whole-file report. It fails the test when the two differ in
// verdict, tier or any failed row (the streaming verifier counts passing entry and
// inclusion rows instead of listing them), so every corruption a test makes is caught by
// both, with the same rows and details.
func verifyBoth(tb testing.TB, b *verify.Bundle, opts verify.Options) *verify.Report {
	tb.Helper()
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, b); err != nil {
		tb.Fatal(err)
	}
	parsed, err := verify.ParseBundle(bytes.NewReader(buf.Bytes()))
	if err != nil {
		tb.Fatal(err)
	}
	whole := verify.Verify(parsed, opts)
	streamed, err := verify.VerifyStream(context.Background(), bytes.NewReader(buf.Bytes()), int64(buf.Len()), opts)
	if err != nil {
		tb.Fatalf("streamed: %v", err)
	}
	if streamed.OK != whole.OK || streamed.Tier != whole.Tier || !reflect.DeepEqual(streamed.Failed(), whole.Failed()) {
		tb.Fatalf("streamed ok %v tier %s failed %+v; whole-file ok %v tier %s failed %+v",
			streamed.OK, streamed.Tier, streamed.Failed(), whole.OK, whole.Tier, whole.Failed())
	}
	return whole
}

// failed names the failed rows of a report as "check item".
func failed(r *verify.Report) []string {
	out := []string{}
	for _, c := range r.Failed() {
		out = append(out, strings.TrimSpace(c.Check+" "+c.Item))
	}
	return out
}

func items(check string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s %d", check, i))
	}
	return out
}

func flip(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0x01
	return out
}

// flipSignature changes one bit of a signed note's signature, keeping it well-formed.
func flipSignature(tb testing.TB, signed []byte) []byte {
	tb.Helper()
	i := bytes.LastIndex(signed, []byte(" "))
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(signed[i+1:])))
	if err != nil {
		tb.Fatal(err)
	}
	sig[len(sig)-1] ^= 1
	return append(bytes.Clone(signed[:i+1]), base64.StdEncoding.EncodeToString(sig)+"\n"...)
}

func TestExport_Verifies(t *testing.T) {
	e := exportFixture(t)
	for name, b := range map[string]*verify.Bundle{"full": e.full, "older": e.older} {
		// The command anchor's receipt cannot be checked offline, so it raises no tier.
		rep := verifyBoth(t, b, e.opts)
		if !rep.OK || rep.Tier != verify.TierTrustedTime || rep.TrustedTime == "" || rep.KeySource != verify.KeyFromOptions {
			t.Errorf("%s: got ok %v tier %s time %q key %s, failed %v; want every check passed at trusted-time with a trusted time",
				name, rep.OK, rep.Tier, rep.TrustedTime, rep.KeySource, failed(rep))
		}
	}
	rep := verify.Verify(e.full, verify.Options{TSARoots: e.tsa.Pool})
	if !rep.OK || rep.KeySource != verify.KeyFromBundle || !strings.Contains(rep.Checks[0].Detail, "taken from the bundle") {
		t.Errorf("without a key: got ok %v source %s detail %q, want a pass that says the key came from the bundle",
			rep.OK, rep.KeySource, rep.Checks[0].Detail)
	}
	rep = verify.Verify(e.full, verify.Options{Key: e.f.vkey})
	if !rep.OK || !strings.Contains(strings.Join(details(rep), "\n"), "TSA root taken from the bundle") {
		t.Errorf("without --tsa-ca: got ok %v, want a pass that says the TSA root came from the bundle", rep.OK)
	}
}

func details(r *verify.Report) []string {
	var out []string
	for _, c := range r.Checks {
		out = append(out, c.Detail)
	}
	return out
}

func TestExport_TierWithoutAnchors(t *testing.T) {
	f := newFixture(t)
	appendN(t, f.db, 0, 3)
	f.checkpoint(t)
	b, err := f.cp.Export(t.Context(), audit.Selection{FromIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep := verifyBoth(t, b, verify.Options{Key: f.vkey})
	if !rep.OK || rep.Tier != verify.TierTamperDetecting || b.Anchored != nil || len(b.Entries) != 2 {
		t.Errorf("got ok %v tier %s anchored %v entries %d, want tamper-detecting over 2 entries", rep.OK, rep.Tier, b.Anchored, len(b.Entries))
	}
}

// TestVerify_EachCheckCatchesItsCorruption corrupts one field of a real exported bundle per
// case and asserts exactly which rows fail.
func TestVerify_EachCheckCatchesItsCorruption(t *testing.T) {
	e := exportFixture(t)
	_, otherKey := audittest.NewKey(t)
	otherSigner, _ := audittest.NewKey(t)
	other := audittest.NewTSA(t)
	anchorsFail := []string{"anchor " + e.names["file"], "anchor " + e.names["rfc3161"], "anchor " + e.names["command"]}
	all := items("inclusion", 0, 16)
	tests := []struct {
		name   string
		older  bool // corrupt the older bundle (with a consistency proof) instead of the full one
		mutate func(b *verify.Bundle, o *verify.Options)
		want   []string
	}{
		{"another key given", false, func(b *verify.Bundle, o *verify.Options) { o.Key = otherKey },
			concat([]string{"key", "checkpoint", "selection"}, all, []string{"anchored checkpoint", "consistency", "anchor coverage"}, anchorsFail)},
		{"bundle key swapped", false, func(b *verify.Bundle, o *verify.Options) { b.Key = otherKey; o.Key = "" },
			concat([]string{"key", "checkpoint", "selection"}, all, []string{"anchored checkpoint", "consistency", "anchor coverage"}, anchorsFail)},
		{"checkpoint signature flipped", false, func(b *verify.Bundle, o *verify.Options) { b.Checkpoint = flipSignature(t, b.Checkpoint) },
			concat([]string{"checkpoint"}, all, []string{"consistency"})},
		{"checkpoint signed by another key", false, func(b *verify.Bundle, o *verify.Options) {
			c, _ := verify.ParseCheckpoint(b.Checkpoint[:bytes.Index(b.Checkpoint, []byte("\n\n"))+1])
			b.Checkpoint, _ = verify.SignCheckpoint(c, otherSigner)
		}, concat([]string{"checkpoint"}, all, []string{"consistency"})},
		{"older checkpoint swapped in", false, func(b *verify.Bundle, o *verify.Options) { b.Checkpoint = e.older.Checkpoint },
			concat(all, []string{"consistency"})},
		{"checkpoint root forged and re-signed", false, func(b *verify.Bundle, o *verify.Options) {
			b.Checkpoint = e.signer(verify.Checkpoint{Origin: b.Origin, Size: 16, Hash: make([]byte, 32)})
		}, concat(all, []string{"consistency"})},
		{"entry byte flipped", false, func(b *verify.Bundle, o *verify.Options) { b.Entries[3].Entry = flip(b.Entries[3].Entry, 10) },
			[]string{"entry 3"}},
		{"leaf hash flipped", false, func(b *verify.Bundle, o *verify.Options) { b.Entries[3].LeafHash = flip(b.Entries[3].LeafHash, 0) },
			[]string{"entry 3", "inclusion 3"}},
		{"inclusion proof flipped", false, func(b *verify.Bundle, o *verify.Options) {
			b.Entries[3].InclusionProof[1] = flip(b.Entries[3].InclusionProof[1], 5)
		}, []string{"inclusion 3"}},
		{"inclusion proof shortened", false, func(b *verify.Bundle, o *verify.Options) {
			b.Entries[5].InclusionProof = b.Entries[5].InclusionProof[1:]
		}, []string{"inclusion 5"}},
		{"entries swapped in place", false, func(b *verify.Bundle, o *verify.Options) {
			b.Entries[3].Entry, b.Entries[4].Entry = b.Entries[4].Entry, b.Entries[3].Entry
			b.Entries[3].LeafHash, b.Entries[4].LeafHash = b.Entries[4].LeafHash, b.Entries[3].LeafHash
		}, []string{"entry 3", "inclusion 3", "entry 4", "inclusion 4"}},
		{"entry duplicated", false, func(b *verify.Bundle, o *verify.Options) {
			b.Entries = slices.Insert(b.Entries, 4, b.Entries[3])
			b.Selection.Count++
		}, []string{"selection", "entries"}},
		{"entries reordered", false, func(b *verify.Bundle, o *verify.Options) { b.Entries[3], b.Entries[4] = b.Entries[4], b.Entries[3] },
			[]string{"selection", "entries"}},
		{"entry dropped", false, func(b *verify.Bundle, o *verify.Options) {
			b.Entries = slices.Delete(b.Entries, 3, 4)
			b.Selection.Count--
		}, []string{"selection", "entries"}},
		{"entry dropped, count kept", false, func(b *verify.Bundle, o *verify.Options) { b.Entries = slices.Delete(b.Entries, 3, 4) },
			[]string{"selection", "entries"}},
		{"first entry dropped", false, func(b *verify.Bundle, o *verify.Options) {
			b.Entries = b.Entries[1:]
			b.Selection.Count--
		}, []string{"selection", "entries"}},
		{"anchored checkpoint signature flipped", false, func(b *verify.Bundle, o *verify.Options) {
			b.Anchored.Checkpoint = flipSignature(t, b.Anchored.Checkpoint)
		}, concat([]string{"anchored checkpoint", "consistency", "anchor coverage"}, anchorsFail)},
		{"consistency proof flipped", true, func(b *verify.Bundle, o *verify.Options) {
			b.Anchored.ConsistencyProof[0] = flip(b.Anchored.ConsistencyProof[0], 3)
		}, []string{"consistency"}},
		{"consistency proof dropped", true, func(b *verify.Bundle, o *verify.Options) { b.Anchored.ConsistencyProof = nil },
			[]string{"consistency"}},
		{"file evidence for another checkpoint", false, func(b *verify.Bundle, o *verify.Options) {
			b.Anchored.Evidence[0].CheckpointSHA256 = flip(b.Anchored.Evidence[0].CheckpointSHA256, 0)
		}, []string{"anchor " + e.names["file"]}},
		{"timestamp token flipped", false, func(b *verify.Bundle, o *verify.Options) {
			ev := &b.Anchored.Evidence[1]
			ev.Token = flip(ev.Token, len(ev.Token)-10)
		}, []string{"anchor " + e.names["rfc3161"]}},
		{"timestamp from an untrusted TSA", false, func(b *verify.Bundle, o *verify.Options) { o.TSARoots = other.Pool },
			[]string{"anchor " + e.names["rfc3161"]}},
		{"command evidence for another checkpoint", false, func(b *verify.Bundle, o *verify.Options) {
			b.Anchored.Evidence[2].CheckpointSHA256 = flip(b.Anchored.Evidence[2].CheckpointSHA256, 31)
		}, []string{"anchor " + e.names["command"]}},
		{"unknown anchor type", false, func(b *verify.Bundle, o *verify.Options) { b.Anchored.Evidence[0].Type = "s4" },
			[]string{"anchor " + e.names["file"]}},
		{"anchor evidence removed", false, func(b *verify.Bundle, o *verify.Options) { b.Anchored.Evidence = nil },
			[]string{"anchor"}},
		{"manifest byte flipped", false, func(b *verify.Bundle, o *verify.Options) { b.Manifests[0].Manifest = flip(b.Manifests[0].Manifest, 2) },
			[]string{"manifest 0", "manifest closure"}},
		{"unbound manifest added", false, func(b *verify.Bundle, o *verify.Options) {
			b.Manifests = append(b.Manifests, verify.Manifest{Manifest: []byte(`{}`)})
		}, []string{"manifest 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := e.full
			if tt.older {
				src = e.older
			}
			b, opts := roundTrip(t, src), e.opts
			if rep := verify.Verify(b, opts); !rep.OK {
				t.Fatalf("before corruption: failed %v", failed(rep))
			}
			tt.mutate(b, &opts)
			rep := verifyBoth(t, b, opts)
			if rep.OK || rep.Tier != verify.TierNone {
				t.Errorf("got ok %v tier %s, want a failure at tier none", rep.OK, rep.Tier)
			}
			if diff := cmp.Diff(tt.want, failed(rep)); diff != "" {
				t.Errorf("failed rows (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVerify_CatchesUnanchoredEntries: a bundle whose entries go past the latest anchored
// checkpoint says so.
func TestVerify_CatchesUnanchoredEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "anchor.jsonl")
	f := newFixture(t, anchor.NewFile(path, nil))
	appendN(t, f.db, 0, 5)
	f.checkpoint(t)
	appendN(t, f.db, 5, 5)
	if _, err := f.checkpointer(t).Checkpoint(t.Context()); err != nil { // no anchors this time
		t.Fatal(err)
	}
	b, err := f.cp.Export(t.Context(), audit.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	rep := verifyBoth(t, b, verify.Options{Key: f.vkey})
	if diff := cmp.Diff([]string{"anchor coverage"}, failed(rep)); diff != "" {
		t.Errorf("failed rows (-want +got):\n%s", diff)
	}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
