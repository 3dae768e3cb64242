package worker

// An attack on result.json through the worker: the agent names the files it leaves under
// out/outputs/ (and the links, FIFOs and unprintable names the worker skips) so that each
// name, quoted by the worker's appended encoder, would close its string and add keys of its
// own: a forged final answer, a status, another output. The host reads result.json back with
// wire.ParseResult (the fixture's run), and what it reads is exactly what the worker listed.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// r47jForgedFinal is a file name that, unescaped, would close the outputs and forge a final
// answer the worker vouches for.
const r47jForgedFinal = `x"}],"final":{"path":"outputs/final.md","size":1,"sha256":"` +
	"abababababababababababababababababababababababababababababababab" + `"},"y":[{"a":"`

func TestRedTeam47j_WorkerOutputNamesStayNames(t *testing.T) {
	// Regular files the worker lists: printable names holding what JSON escapes.
	regular := []string{
		`a"b`, `<script>&amp;</script>`, "x\u2028y\u2029z", `{"k":"v"}`, `"`, `""`, `"}`, `"]}`,
		`","status":"failed","reason":"worker-failed","x":"`, "日本語", "\u200b", "\ufeff", "\u00ad",
		strings.Repeat(`"`, 255), strings.Repeat("<", 255), strings.Repeat("\u2028", 85),
		r47jForgedFinal, // a directory `x"}],"final":{"path":"outputs` and a file under it
	}
	deep := strings.Repeat(strings.Repeat(`"<`, 127)+"/", 12) + "leaf" // 3 KiB of names a JSON escape multiplies
	regular = append(regular, deep)
	// Entries the worker skips, by kind, and the path it lists for each.
	type skip struct{ name, kind, listed, why string }
	skips := []skip{
		{`"},"status":"ok`, "symlink", wire.OutputsDir + `/"},"status":"ok`, wire.SkipSymlink},
		{strings.Repeat(`"`, 200), "fifo", wire.OutputsDir + "/" + strings.Repeat(`"`, 200), wire.SkipNotRegular},
		{"back\\slash\"", "file", wire.OutputsDir + `/"back\\slash\""`, wire.SkipUnprintable},
		{"ctl\x01\x1f\x7f\"", "file", wire.OutputsDir + `/"ctl\x01\x1f\x7f\""`, wire.SkipUnprintable},
		{"bad\xff\xfe\"utf8", "file", wire.OutputsDir + `/"bad\xff\xfe\"utf8"`, wire.SkipUnprintable},
		{"nl\n\"}", "dir", wire.OutputsDir + `/"nl\n\"}"`, wire.SkipUnprintable},
		{"\xed\xa0\x80", "file", wire.OutputsDir + `/"\xed\xa0\x80"`, wire.SkipUnprintable},
	}

	f := newFixture(t, "true")
	f.write()
	outs := f.outPath(wire.OutputsDir)
	put := func(name string, data []byte) {
		p := filepath.Join(outs, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range regular {
		put(n, []byte(n))
	}
	for _, s := range skips {
		p := filepath.Join(outs, s.name)
		var err error
		switch s.kind {
		case "symlink":
			err = os.Symlink(f.outPath(wire.ResultFile), p)
		case "fifo":
			err = syscall.Mkfifo(p, 0o644)
		case "file":
			err = os.WriteFile(p, []byte("x"), 0o644)
		case "dir":
			if err = os.Mkdir(p, 0o755); err == nil {
				err = os.WriteFile(filepath.Join(p, "inside"), []byte("x"), 0o644)
			}
		}
		if err != nil {
			t.Skipf("SKIP: the file system refuses the name %q: %v", s.name, err)
		}
	}

	_, res := f.run() // ParseResult, the host's reader, or the test fails
	raw, err := os.ReadFile(f.outPath(wire.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(raw) {
		t.Fatalf("result.json is not UTF-8: %.300q", raw)
	}
	// Every string the worker listed is valid UTF-8, so the host's reading marshals back to
	// the very bytes the worker wrote: its encoder wrote encoding/json's bytes.
	if again, err := json.Marshal(res); err != nil || !bytes.Equal(again, raw) {
		t.Fatalf("result.json is not encoding/json's encoding of what the host reads (%v):\nfile %.400q\njson %.400q", err, raw, again)
	}
	if res.Status != wire.StatusOK || res.Reason != wire.ReasonNone || res.Final != nil || res.NeedsInput != nil {
		t.Fatalf("status %q reason %q final %+v: the names changed the result (detail %.200q)", res.Status, res.Reason, res.Final, res.Detail)
	}
	var want []string
	for _, n := range regular {
		want = append(want, wire.OutputsDir+"/"+n)
	}
	slices.Sort(want)
	var got []string
	for _, o := range res.Outputs {
		got = append(got, o.Path)
		if name, _ := strings.CutPrefix(o.Path, wire.OutputsDir+"/"); o.SHA256 != hexSum(name) || o.Size != int64(len(name)) {
			t.Errorf("output %.80q: size %d sha256 %s, not its own content's", o.Path, o.Size, o.SHA256)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("outputs read by the host:\n%q\nwant\n%q", got, want)
	}
	for _, s := range skips {
		if !slices.Contains(res.OutputsSkipped, wire.SkippedOutput{Path: s.listed, Why: s.why}) {
			t.Errorf("skipped %q (%s) not listed as %q %q; skipped: %q", s.name, s.kind, s.listed, s.why, res.OutputsSkipped)
		}
	}
	if len(res.OutputsSkipped) != len(skips) {
		t.Errorf("%d skipped entries, want %d: %q", len(res.OutputsSkipped), len(skips), res.OutputsSkipped)
	}
}
