package verify_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

var update = flag.Bool("update", false, "rewrite testdata/bundle-v3.json and its keys from a fresh log")

// The golden bundle of the current format and its keys; -update rewrites them.
const (
	goldenBundle = "testdata/bundle-v3.json"
	goldenKey    = "testdata/audit-v3.pub"
	goldenTSACA  = "testdata/tsa-ca-v3.pem"
)

// The golden bundle of format v1, written before selections were signed, and its keys. It
// is never rewritten: it pins how agora treats old bundles.
const (
	goldenV1Bundle = "testdata/bundle-v1.json"
	goldenV1Key    = "testdata/audit.pub"
	goldenV1TSACA  = "testdata/tsa-ca.pem"
)

// writeGolden exports a real log (file, rfc3161 and command anchors; a manifest) into
// testdata. The golden bundle pins the v3 wire format: it must keep verifying.
func writeGolden(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, filepath.Join(dir, "agora.db"), audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, vkey := audittest.NewKey(t)
	tsa := audittest.NewTSA(t)
	ta, err := anchor.NewRFC3161(tsa.URL, tsa.CAPEM, audittest.LoopbackPolicy)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := anchor.NewCommand([]string{"/bin/sh", "-c", "cat >/dev/null; echo s3://audit/agora.db/7?versionId=3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.NewCheckpointer(db, audit.CheckpointerOptions{LogName: "agora.db", Signer: s, VerifierKey: vkey,
		Anchors: []audit.Anchor{anchor.NewFile(filepath.Join(dir, "anchor.jsonl"), nil), ta, ca}})
	if err != nil {
		t.Fatal(err)
	}
	manifest := []byte(`{"inputs":[],"subagent":"fixer@sha256:01"}`)
	sum := sha256.Sum256(manifest)
	l := audit.New(nil)
	for i, e := range []audit.Entry{
		{Actor: "alice", Kind: "catalog.register", Subject: "subagent/fixer", Details: map[string]any{"digest": "sha256:" + strings.Repeat("2", 64)}},
		{Actor: "ci", Kind: "dispatch.start", Subject: "d-1", Details: map[string]any{"manifest": "sha256:" + hex.EncodeToString(sum[:])}},
		{Actor: "ci", Kind: "dispatch.end", Subject: "d-1", Details: map[string]any{"status": "succeeded"}},
		{Actor: "alice", Kind: "catalog.register", Subject: "capability/repo-tools", Details: map[string]any{"digest": "sha256:" + strings.Repeat("1", 64)}},
		{Actor: "d-2 fixer@sha256:01", Kind: "tool.call", Subject: "read_file", Details: map[string]any{"args": "sha256:" + strings.Repeat("3", 64)}},
	} {
		if err := db.Tx(ctx, func(tx *sql.Tx) error { _, err := l.Append(ctx, tx, e); return err }); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if res, err := cp.Checkpoint(ctx); err != nil || res.Err() != nil {
				t.Fatal(err, res.Err())
			}
		}
	}
	if res, err := cp.Checkpoint(ctx); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	b, err := cp.Export(ctx, audit.Selection{Kind: "dispatch.*"})
	if err != nil {
		t.Fatal(err)
	}
	b.Manifests = []verify.Manifest{{Manifest: manifest}}
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{goldenBundle: buf.Bytes(), goldenKey: []byte(vkey + "\n"), goldenTSACA: tsa.CAPEM} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readGolden(tb testing.TB) ([]byte, verify.Options) {
	tb.Helper()
	return readBundleFiles(tb, goldenBundle, goldenKey, goldenTSACA)
}

func readBundleFiles(tb testing.TB, bundle, pub, tsaCA string) ([]byte, verify.Options) {
	tb.Helper()
	data, err := os.ReadFile(bundle)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := os.ReadFile(pub)
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := os.ReadFile(tsaCA)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		tb.Fatalf("%s holds no certificate", tsaCA)
	}
	return data, verify.Options{Key: string(key), TSARoots: pool}
}

func TestGoldenBundle(t *testing.T) {
	if *update {
		writeGolden(t)
	}
	data, opts := readGolden(t)
	b, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// Its command anchor's receipt is a claim no verifier can check offline: the tier is
	// trusted-time (TestVerify_AnchoredCopy reaches tamper-evident with the auditor's copy).
	rep := verify.Verify(b, opts)
	if !rep.OK || rep.Tier != verify.TierTrustedTime || rep.TrustedTime == "" || rep.TSARoot != verify.TSARootGiven {
		for _, c := range rep.Failed() {
			t.Errorf("%s %s: %s", c.Check, c.Item, c.Detail)
		}
		t.Fatalf("golden bundle: ok %v tier %s root %q; want every check passed at trusted-time with a trusted time from the given roots",
			rep.OK, rep.Tier, rep.TSARoot)
	}
	// The rows are fixed in kind and order for this bundle.
	var rows []string
	for _, c := range rep.Checks {
		rows = append(rows, strings.TrimSpace(c.Check+" "+c.Item))
	}
	want := "key checkpoint selection entries entry 1 inclusion 1 entry 2 inclusion 2 anchored checkpoint consistency anchor coverage"
	if got := strings.Join(rows, " "); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "manifest 0 manifest closure") {
		t.Errorf("rows %q, want %q ... manifest 0 manifest closure", got, want)
	}
}

// TestGoldenBundle_V1 checks a bundle from before selections were signed: it still parses
// and every row that can be checked passes, but the selection row fails and says what is
// missing, so an old bundle (or a new one relabelled v1 to drop its signed selection) never
// verifies.
func TestGoldenBundle_V1(t *testing.T) {
	data, opts := readBundleFiles(t, goldenV1Bundle, goldenV1Key, goldenV1TSACA)
	b, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Verify(b, opts)
	if rep.OK || rep.Tier != verify.TierNone {
		t.Errorf("got ok %v tier %s, want a failure at tier none", rep.OK, rep.Tier)
	}
	failed := rep.Failed()
	if len(failed) != 1 || failed[0].Check != verify.CheckSelection ||
		!strings.Contains(failed[0].Detail, "format agora-audit-bundle/v1 carries no signed selection, so entries removed from it cannot be detected") {
		t.Errorf("failed rows %+v, want only the selection row saying the signed selection is missing", failed)
	}
}

func TestParseBundle(t *testing.T) {
	data, _ := readGolden(t)
	tests := []struct {
		name string
		edit func(string) string
		want string
	}{
		{"unknown field", func(s string) string { return strings.Replace(s, `"format"`, `"extra": 1, "format"`, 1) }, "unknown field"},
		{"trailing data", func(s string) string { return s + "{}" }, "data after the JSON document"},
		{"other format", func(s string) string { return strings.Replace(s, verify.Format, "agora-audit-bundle/v9", 1) }, "format"},
		{"v1 with a signed selection", func(s string) string { return strings.Replace(s, verify.Format, verify.FormatV1, 1) }, "cannot carry selection_note"},
		{"null entries", func(s string) string { return strings.Replace(s, `"entries": [`, `"entries": null, "x": [`, 1) }, "unknown field"},
		{"invalid base64", func(s string) string { return strings.Replace(s, `"checkpoint": "`, `"checkpoint": "!`, 1) }, "not canonical base64"},
		{"not JSON", func(s string) string { return "[" }, "malformed audit bundle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verify.ParseBundle(strings.NewReader(tt.edit(string(data))))
			if !errors.Is(err, verify.ErrBundle) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want ErrBundle containing %q", err, tt.want)
			}
		})
	}
	if _, err := verify.ParseBundle(strings.NewReader(`{"format":"` + verify.Format + `","entries":[],"manifests":null}`)); !errors.Is(err, verify.ErrBundle) {
		t.Errorf("null manifests: got %v, want ErrBundle", err)
	}
}

// FuzzParseBundle feeds the parser and then the verifier: neither may panic, and a report is
// OK exactly when no row failed.
func FuzzParseBundle(f *testing.F) {
	data, opts := readGolden(f)
	f.Add(data)
	f.Add(bytes.Replace(data, []byte(`"index": 2`), []byte(`"index": 3`), 1))
	f.Add(bytes.Replace(data, []byte(`"count": 2`), []byte(`"count": 1`), 1))
	f.Add(bytes.Replace(data, []byte(`"kind": "dispatch.*"`), []byte(`"kind": "dispatch.start"`), 1))
	f.Add(bytes.Replace(data, []byte(`"selection_note": "`), []byte(`"selection_note": "AA`), 1))
	v1, _ := readBundleFiles(f, goldenV1Bundle, goldenV1Key, goldenV1TSACA)
	f.Add(v1)
	f.Add(bytes.Replace(data, []byte(`"manifests"`), []byte(`"Manifests"`), 1))
	f.Add(bytes.Replace(data, []byte(`"receipt"`), []byte(`"receipt": "", "Receipt"`), 1))
	f.Add([]byte(`{"format":"` + verify.Format + `","entries":[{"index":0,"entry":"e30=","leaf_hash":"","inclusion_proof":[""]}],"manifests":[{"manifest":""}],"anchored":{"evidence":[{"type":"rfc3161","token":"MAA="}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := verify.ParseBundle(bytes.NewReader(data))
		if err != nil {
			return
		}
		rep := verify.Verify(b, opts)
		if rep.OK != (len(rep.Failed()) == 0) || (rep.OK && rep.Tier == verify.TierNone) {
			t.Errorf("report ok %v tier %s with %d failed rows", rep.OK, rep.Tier, len(rep.Failed()))
		}
	})
}

// BenchmarkParseBundle parses a 10,000-entry bundle (about 11 MB, the size of
// BenchmarkExportVerify's in internal/audit): the strict reading every `agora verify` starts with.
func BenchmarkParseBundle(b *testing.B) {
	data, _ := readGolden(b)
	g, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	proof := make([][]byte, 14)
	for i := range proof {
		proof[i] = bytes.Repeat([]byte{byte(i)}, 32)
	}
	g.Entries = g.Entries[:0]
	for i := range 10000 {
		entry := []byte(`{"actor":"agora","details":{"manifest":"sha256:00","state":"finished"},"kind":"dispatch.finished","seq":` +
			strconv.Itoa(i) + `,"subject":"dispatch/01M8195T3S9D4HWY2CDP68S6JA","time":"2026-11-22T09:25:11.930671494Z"}`)
		g.Entries = append(g.Entries, verify.Entry{Index: uint64(i), Entry: entry, LeafHash: verify.LeafHash(entry), InclusionProof: proof})
	}
	g.Selection.Count = len(g.Entries)
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, g); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := verify.ParseBundle(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bundle-bytes")
}
