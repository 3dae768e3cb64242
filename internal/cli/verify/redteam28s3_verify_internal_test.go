package verify

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

// rt28s3Bundle exports a real log of n entries (each about pad bytes of details). It
// returns the bundle's bytes, the log's key, and a checkpoint of the same log one entry
// later (a checkpoint over a different tree, signed by the same key).
func rt28s3Bundle(t *testing.T, n, pad int) (data []byte, key string, later []byte) {
	t.Helper()
	ctx := t.Context()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "agora.db"), audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	skey, vkey := audittest.NewKeyText(t)
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.NewCheckpointer(db, audit.CheckpointerOptions{LogName: "agora.db", Signer: s, VerifierKey: vkey})
	if err != nil {
		t.Fatal(err)
	}
	l := audit.New(nil)
	filler := strings.Repeat("x", pad)
	entries := make([]audit.Entry, 0, 1000)
	for i := 0; i < n; i += len(entries) {
		entries = entries[:0]
		for j := i; j < min(n, i+1000); j++ {
			// Escapes and non-ASCII in the canonical bytes: a rewrite of them is a forgery too.
			entries = append(entries, audit.Entry{Kind: "catalog.register", Subject: fmt.Sprintf("subagent/s%d", j), Actor: "alice",
				Details: map[string]any{"n": j, "pad": filler, "q": "\"<é>\\\u2028"}})
		}
		if err := db.Tx(ctx, func(tx *sql.Tx) error { _, err := l.AppendAll(ctx, tx, entries); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := cp.Export(ctx, audit.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := l.Append(ctx, tx, audit.Entry{Kind: "catalog.register", Subject: "subagent/later"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	b2, err := cp.Export(ctx, audit.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), vkey, b2.Checkpoint
}

// rt28s3Verdict is what agora verify says of data, read as a file (the parallel read from
// parallelReadFrom) or on stdin (one stream), with GOMAXPROCS procs: the failed rows, or the
// error.
func rt28s3Verdict(t *testing.T, data []byte, key string, procs int, stdin bool) (bool, string) {
	t.Helper()
	prev := runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(prev)
	var rep *verify.Report
	var err error
	if stdin {
		rep, err = verifyFile(bytes.NewReader(data), "-", verify.Options{Key: key})
	} else {
		path := filepath.Join(t.TempDir(), "bundle.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err = verifyFile(nil, path, verify.Options{Key: key})
	}
	if err != nil {
		return false, "error: " + err.Error()
	}
	var rows []string
	for _, r := range rep.Failed() {
		rows = append(rows, r.Check+" "+r.Item+": "+r.Detail)
	}
	return rep.OK, fmt.Sprint(len(rep.Checks), " checks; failed: ", strings.Join(rows, " | "))
}

// rt28s3Entries are the entry objects of a bundle as WriteBundle writes it: where each
// starts and ends in data.
func rt28s3Entries(t *testing.T, data []byte) [][2]int {
	t.Helper()
	at := bytes.Index(data, []byte(`"entries": [`))
	if at < 0 {
		t.Fatal("fixture: no entries")
	}
	var spans [][2]int
	i := at + len(`"entries": [`)
	for {
		s := bytes.IndexByte(data[i:], '{')
		c := bytes.Index(data[i:], []byte(`]`))
		if s < 0 || c < s {
			break
		}
		s += i
		depth, e := 0, s
		for ; ; e++ {
			if data[e] == '{' {
				depth++
			} else if data[e] == '}' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		spans = append(spans, [2]int{s, e + 1})
		i = e + 1
		if bytes.HasPrefix(bytes.TrimLeft(data[i:], " \n"), []byte("]")) {
			break
		}
	}
	return spans
}

// entryAt is the index of the entry whose object holds byte off.
func entryAt(spans [][2]int, off int) int {
	for k, sp := range spans {
		if sp[1] > off {
			return k
		}
	}
	return len(spans) - 1
}

// TestRedTeam28S3_VerifyFastPathsFailWhatTheyMust attacks fae9729 and 4da81c1 (the bundle
// read on every CPU, GOGC off while verifying): a real 700-entry bundle, read on every CPU
// (parallelReadFrom lowered to 64 KiB for the test: the split is the same code at any size),
// forged in each way below, verified as a file with 1, 2 and 3 CPUs and on stdin (one stream)
// with 1. Each forgery fails, and every way of reading it gives the same rows; the untouched
// bundle passes every way. The forgeries sit where the parallel read splits the file: the
// entries holding its half and its third. The wide tree levels hashed on every CPU are
// attacked in internal/audit/verify (TestRedTeam28S3_WideTreeRowsAreTheWalksRows).
func TestRedTeam28S3_VerifyFastPathsFailWhatTheyMust(t *testing.T) {
	defer func(was int64) { parallelReadFrom = was }(parallelReadFrom)
	parallelReadFrom = 64 << 10
	const n = 700
	data, key, later := rt28s3Bundle(t, n, 300)
	if int64(len(data)) < 4*parallelReadFrom {
		t.Fatalf("fixture: %d bytes, under 4x the parallel read's %d", len(data), parallelReadFrom)
	}
	spans := rt28s3Entries(t, data)
	if len(spans) != n {
		t.Fatalf("fixture: %d entry objects found, want %d", len(spans), n)
	}
	half, third := entryAt(spans, len(data)/2), entryAt(spans, len(data)/3)
	obj := func(k int) []byte { return data[spans[k][0]:spans[k][1]] }
	replace := func(from, to int, with []byte) []byte {
		out := append([]byte{}, data[:from]...)
		out = append(out, with...)
		return append(out, data[to:]...)
	}
	// rewrite re-encodes entry k's canonical bytes with f and sets its leaf hash to match,
	// as a forger who knows RFC 6962 would.
	rewrite := func(k int, f func([]byte) []byte) []byte {
		var e struct {
			Index          uint64   `json:"index"`
			Entry          []byte   `json:"entry"`
			LeafHash       []byte   `json:"leaf_hash"`
			InclusionProof [][]byte `json:"inclusion_proof"`
		}
		if err := json.Unmarshal(obj(k), &e); err != nil {
			t.Fatal(err)
		}
		was := e.Entry
		if e.Entry = f(bytes.Clone(was)); bytes.Equal(e.Entry, was) {
			t.Fatalf("fixture: the rewrite of entry %d changed nothing", k)
		}
		h := sha256.Sum256(append([]byte{0}, e.Entry...))
		e.LeafHash = h[:]
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return replace(spans[k][0], spans[k][1], b)
	}
	flipB64 := func(k int) []byte {
		o := obj(k)
		at := bytes.Index(o, []byte(`"entry": "`)) + len(`"entry": "`) + 40
		c := o[at]
		r := byte('A')
		if c == 'A' {
			r = 'B'
		}
		out := bytes.Clone(data)
		out[spans[k][0]+at] = r
		return out
	}
	swap := func(a, b int) []byte { // a < b, adjacent objects
		out := append([]byte{}, data[:spans[a][0]]...)
		out = append(out, obj(b)...)
		out = append(out, data[spans[a][1]:spans[b][0]]...)
		out = append(out, obj(a)...)
		return append(out, data[spans[b][1]:]...)
	}
	cpStart := bytes.Index(data, []byte(`"checkpoint": "`))
	if cpStart < 0 {
		t.Fatal("fixture: no checkpoint field")
	}
	cpStart += len(`"checkpoint": "`)
	cpEnd := cpStart + bytes.IndexByte(data[cpStart:], '"')
	forged := map[string][]byte{
		"a byte of the entry at the half":  flipB64(half),
		"a byte of the entry at a third":   flipB64(third),
		"a byte of the last entry":         flipB64(len(spans) - 1),
		"the middle leaves reordered":      swap(n/2-1, n/2),
		"the half's entries reordered":     swap(half, half+1),
		"the half's entry duplicated":      replace(spans[half][1], spans[half][1], append([]byte(",\n    "), obj(half)...)),
		"the half's entry missing":         replace(spans[half][0], spans[half+1][0], nil),
		"the last entry missing":           replace(spans[len(spans)-2][1], spans[len(spans)-1][1], nil),
		"a checkpoint over another tree":   replace(cpStart, cpEnd, []byte(base64.StdEncoding.EncodeToString(later))),
		"whitespace in the half's entry":   rewrite(half, func(b []byte) []byte { return bytes.Replace(b, []byte(`,"kind"`), []byte(`, "kind"`), 1) }),
		"keys reordered in the third's":    rewrite(third, func(b []byte) []byte { return reorderKeys(t, b) }),
		"an escape written at the half":    rewrite(half, func(b []byte) []byte { return bytes.Replace(b, []byte("\u2028"), []byte(`\u2028`), 1) }),
		"a non-ASCII escaped at the third": rewrite(third, func(b []byte) []byte { return bytes.Replace(b, []byte("é"), []byte(`\u00e9`), 1) }),
		"a literal escaped at the third":   rewrite(third, func(b []byte) []byte { return bytes.Replace(b, []byte(`"alice"`), []byte(`"\u0061lice"`), 1) }),
		"a slash escaped in the last":      rewrite(len(spans)-1, func(b []byte) []byte { return bytes.Replace(b, []byte(`subagent/`), []byte(`subagent\/`), 1) }),
	}
	rt28s3EveryWay(t, data, key, forged)
}

// rt28s3EveryWay verifies the untouched bundle and each forgery read on 1, 2 and 3 CPUs and
// on stdin: the untouched one passes every way, each forgery fails every way with the same rows.
func rt28s3EveryWay(t *testing.T, data []byte, key string, forged map[string][]byte) {
	t.Helper()
	type way struct {
		procs int
		stdin bool
	}
	ways := []way{{1, false}, {2, false}, {3, false}, {1, true}}
	for _, w := range ways {
		if ok, rows := rt28s3Verdict(t, data, key, w.procs, w.stdin); !ok {
			t.Fatalf("the untouched bundle fails (%+v): %s", w, rows)
		}
	}
	for name, b := range forged {
		if bytes.Equal(b, data) {
			t.Errorf("%s: the forgery changed nothing (fixture)", name)
			continue
		}
		var first string
		for i, w := range ways {
			ok, rows := rt28s3Verdict(t, b, key, w.procs, w.stdin)
			if ok {
				t.Errorf("%s: passes (%+v): %s", name, w, rows)
			}
			if i == 0 {
				first = rows
			} else if rows != first {
				t.Errorf("%s: %+v says\n%s\nwhere %+v says\n%s", name, w, rows, ways[0], first)
			}
		}
	}
}

// reorderKeys swaps the first two keys of the canonical object b (its "actor" and
// "details"), keeping every byte of their values.
func reorderKeys(t *testing.T, b []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.WriteString(`{"details":` + string(m["details"]) + `,"actor":` + string(m["actor"]))
	for _, k := range []string{"kind", "seq", "subject", "time"} {
		out.WriteString(`,"` + k + `":` + string(m[k]))
	}
	out.WriteString("}")
	if reflect.DeepEqual(out.Bytes(), b) {
		t.Fatal("reorderKeys changed nothing")
	}
	return out.Bytes()
}
