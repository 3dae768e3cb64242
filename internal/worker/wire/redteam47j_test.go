package wire

// Attacks on appendResult, the worker's hand-written encoder of result.json: the agent shapes
// the output names, the skipped names and the detail. Whatever those strings hold, Marshal
// writes encoding/json's bytes, the host's ParseResult reads them as it reads encoding/json's,
// and no string closes its own value to add keys (a forged patch, final, status) or breaks
// the host's strict parse (which refuses invalid UTF-8 in the document).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/jsonstr"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// r47jSHA is a valid SHA-256 in hex, r47jForged another one an injection would carry.
const (
	r47jSHA    = "1111111111111111111111111111111111111111111111111111111111111111"
	r47jForged = "abababababababababababababababababababababababababababababababab"
)

// r47jFragments are strings that try to end their own JSON string: quotes, backslashes (a
// trailing one would escape the closing quote if left alone), escapes written out as text,
// key/value fragments naming the result's own fields, HTML, control bytes, invalid and
// truncated UTF-8, U+2028/9, and encodings of U+FFFD, surrogates and runes past U+10FFFF.
var r47jFragments = []string{
	`"`, `\`, `\\`, `\"`, `"\`, `\\"`, `"}`, `"]}`, `"},{"path":"outputs/x"`,
	`","status":"ok","reason":"","x":"`,
	`","patch":{"path":"patch.diff","sha256":"` + r47jForged + `","bytes":1,"files_changed":1},"z":"`,
	`"}],"final":{"path":"outputs/final.md","size":1,"sha256":"` + r47jForged + `"},"outputs_skipped":[{"path":"outputs/a","why":"symlink`,
	`\u0022,"status":"failed`, `\"status\":\"ok\"`, `/*`, `*/`, `//`,
	"</script><script>alert(1)</script>", "&amp;&#34;&quot;", "<!--", "]]>",
	"\x00", "\x01\x02\x03", "\b\f\n\r\t", "\x1b[2J", "\x1f", "\x7f",
	"\u0085", "\u00ad", "\u200b", "\u200e\u202e", "\ufeff", "\u2028", "\u2029", "a\u2028\u2029b",
	"\xe2\x80", "\xe2\x80\xa8\xe2\x80", "\xe2", "\xe2\x80\xa9", "\xe2\x81\xa8",
	"\xff", "\xfe\xff", "\xc0\xaf", "\xc0\xa2", "\xe0\x80\xa2", "\xed\xa0\x80", "\xed\xa0\x80\xed\xb0\x80",
	"\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "\xef\xbf\xbd", "\xef\xbf\xbe", "\xef\xbf\xbf",
	"\U0010ffff", "\U0001f600", "日本語", "ü", "\x80", "\xbf",
}

// r47jHostile is every fragment, alone, around plain text, and each pair of them, so that a
// fragment's escape is checked against every neighbour.
func r47jHostile() []string {
	var out []string
	for _, a := range r47jFragments {
		out = append(out, a, "x"+a+"y")
		for _, b := range r47jFragments {
			out = append(out, a+b)
		}
	}
	return append(out,
		strings.Repeat(`\`, MaxDetail), strings.Repeat(`"`, MaxDetail), strings.Repeat("<", MaxDetail),
		strings.Repeat("\x00", MaxDetail), strings.Repeat("\u2028", MaxDetail/3),
		// Invalid bytes read back as U+FFFD, three bytes each: a third of the limit.
		strings.Repeat("\xff", MaxDetail/3), strings.Repeat("é", MaxDetail/6)[1:]) // led by a lone continuation byte
}

// r47jBase is a valid result with every optional part the appended encoder writes.
func r47jBase() Result {
	return Result{Version: ResultVersion, Status: StatusOK,
		Phases:     []Phase{{Name: PhaseVerify, OK: true, MS: 1}, {Name: PhaseRuntime, OK: true, MS: 2}, {Name: PhaseOutputs, OK: true}},
		Patch:      &PatchInfo{Path: PatchFile, SHA256: r47jSHA, Bytes: 10, FilesChanged: 1},
		Transcript: &FileInfo{Path: TranscriptFile, Size: 5, SHA256: r47jSHA},
	}
}

// r47jCheck marshals r both ways and checks that the bytes agree, that the host reads them,
// and that what it reads is what encoding/json's bytes read as, with the parts the agent does
// not shape exactly as r holds them.
func r47jCheck(t *testing.T, r Result) {
	t.Helper()
	got, err := r.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	norm := r
	norm.Phases, norm.Outputs, norm.OutputsSkipped = nonNil(r.Phases), nonNil(r.Outputs), nonNil(r.OutputsSkipped)
	want, err := json.Marshal(norm)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal differs from encoding/json:\n got %.300q\nwant %.300q", got, want)
	}
	if !utf8.Valid(got) {
		t.Fatalf("Marshal wrote invalid UTF-8: %.300q", got)
	}
	parsed, err := ParseResult(got)
	if err != nil {
		t.Fatalf("ParseResult refuses Marshal's output: %.300v\n%.300q", err, got)
	}
	var viaStd Result
	if err := json.Unmarshal(want, &viaStd); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(parsed, viaStd) {
		t.Fatalf("the host reads\n%.300v\nencoding/json's bytes read\n%.300v", fmt.Sprintf("%+v", parsed), fmt.Sprintf("%+v", viaStd))
	}
	if parsed.Status != r.Status || parsed.Reason != r.Reason || parsed.ExitCode != r.ExitCode || parsed.Version != r.Version ||
		!reflect.DeepEqual(parsed.Phases, norm.Phases) || !reflect.DeepEqual(parsed.Patch, r.Patch) ||
		!reflect.DeepEqual(parsed.Final, r.Final) || !reflect.DeepEqual(parsed.Transcript, r.Transcript) ||
		len(parsed.Outputs) != len(norm.Outputs) || len(parsed.OutputsSkipped) != len(norm.OutputsSkipped) {
		t.Fatalf("the host reads a different structure:\n got %.300v\nfrom %.300v", fmt.Sprintf("%+v", parsed), fmt.Sprintf("%+v", r))
	}
	// Each agent string reads back as encoding/json says it: itself, each invalid byte U+FFFD.
	same := func(what, in, out string) {
		if in = r47jReplaceInvalid(in); in != out {
			t.Fatalf("%s: %.200q reads back as %.200q", what, in, out)
		}
	}
	same("detail", r.Detail, parsed.Detail)
	for i, o := range norm.Outputs {
		same("output path", o.Path, parsed.Outputs[i].Path)
	}
	for i, s := range norm.OutputsSkipped {
		same("skipped path", s.Path, parsed.OutputsSkipped[i].Path)
	}
}

// r47jReplaceInvalid replaces each byte of s that is not part of valid UTF-8 by U+FFFD, as
// encoding/json does.
func r47jReplaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// TestRedTeam47j_JSONStringEveryRune: appendJSONString quotes every rune, every string of one
// or two bytes (each lead byte cut short at the end included), every three-byte string led by
// 0xE2 (U+2028/9's lead, and every truncation of it) and the surrogates' and overlong
// encodings as encoding/json does.
func TestRedTeam47j_JSONStringEveryRune(t *testing.T) {
	check := func(s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonstr.Append(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("jsonstr.Append(%q) = %s, want %s", s, got, want)
		}
	}
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			// Not encodable as UTF-8: their three-byte forms are invalid, each byte U+FFFD.
			check("a" + string([]byte{0xed, byte(0x80 | (r>>6)&0x3f), byte(0x80 | r&0x3f)}) + "b")
			continue
		}
		check("a" + string(r) + "\\")
	}
	for i := range 1 << 16 {
		check(string([]byte{byte(i >> 8), byte(i)}))
		check(string([]byte{byte(i)}) + "\"")
	}
	for i := range 1 << 16 {
		check(string([]byte{0xe2, byte(i >> 8), byte(i)}))
	}
}

// TestRedTeam47j_AgentStringsKeepTheStructure: hostile detail, output names and skipped names
// (each as the worker could hand them over: an output name passes Validate, printable and
// clean; a skipped name is anything under outputs/) read back on the host as themselves, in a
// result whose status, patch, transcript and final stay what the worker set.
func TestRedTeam47j_AgentStringsKeepTheStructure(t *testing.T) {
	hostile := r47jHostile()
	for _, s := range hostile {
		r := r47jBase()
		r.Detail = s
		r.OutputsSkipped = []SkippedOutput{{Path: OutputsDir + "/" + s, Why: SkipSymlink}, {Path: OutputsDir + "/" + s + s, Why: SkipNotRegular}}
		if name := OutputsDir + "/" + s; checkOutputPath(name) == nil {
			r.Outputs = []OutputInfo{{Path: name, Size: 1, SHA256: r47jSHA}}
		}
		r47jCheck(t, r)
		// A failed result, with no patch, and one with a final answer the worker vouches for.
		r.Status, r.Reason, r.ExitCode, r.Patch = StatusFailed, Reason(lifecycle.WorkerReasons()[0]), -1, nil
		r47jCheck(t, r)
		r.Status, r.Reason, r.ExitCode = StatusOK, ReasonNone, 0
		r.Final = &FileInfo{Path: FinalPath, Size: 3, SHA256: r47jSHA}
		r47jCheck(t, r)
	}
}

// TestRedTeam47j_OutputNamesAsJSON: output names that pass Validate and look like JSON, or
// hold what encoding/json escapes, listed together at the limits (MaxOutputs names, names of
// MaxOutputPath bytes), keep their order and read back as themselves.
func TestRedTeam47j_OutputNamesAsJSON(t *testing.T) {
	var names []string
	for _, s := range r47jFragments {
		if n := OutputsDir + "/" + s; checkOutputPath(n) == nil {
			names = append(names, n)
		}
	}
	for _, long := range []string{`"`, "<", "&", "\u2028", "日", `{"a":"`, "}"} {
		rest := strings.Repeat(long, (MaxOutputPath-len(OutputsDir)-1)/len(long))
		names = append(names, OutputsDir+"/"+rest)
	}
	if len(names) < 30 {
		t.Fatalf("only %d names pass Validate: the attack lost its names", len(names))
	}
	for i := 0; len(names) < MaxOutputs; i++ {
		names = append(names, OutputsDir+"/"+r47jFragments[i%len(r47jFragments)]+"-"+strings.Repeat("<\"", i%50))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	r := r47jBase()
	total := 0
	for _, n := range names {
		if checkOutputPath(n) != nil {
			continue
		}
		if total += len(n); total > MaxOutputNames {
			break
		}
		r.Outputs = append(r.Outputs, OutputInfo{Path: n, Size: 1, SHA256: r47jSHA})
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("the names do not make a valid result: %v", err)
	}
	r47jCheck(t, r)
}

// TestRedTeam47j_SizeLimitAsEncodingJSON: escaping multiplies what the agent names (a "<"
// is six bytes): Marshal's size check counts the escaped bytes, as encoding/json's would, so
// a result one byte over MaxResultSize is refused and one exactly at it is written and read
// by the host.
func TestRedTeam47j_SizeLimitAsEncodingJSON(t *testing.T) {
	r := r47jBase()
	r.Outputs = []OutputInfo{} // as Marshal writes a result without outputs
	var full []byte
	for i := 0; len(full) <= MaxResultSize; i++ {
		if i == MaxSkipped {
			t.Fatalf("%d skipped names make only %d bytes", i, len(full))
		}
		r.OutputsSkipped = append(r.OutputsSkipped, SkippedOutput{Path: OutputsDir + "/" + strings.Repeat("<", 4*MaxOutputPath-len(OutputsDir)-1-i), Why: SkipSymlink})
		var err error
		if full, err = json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Marshal(); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Fatalf("Marshal of %d escaped bytes: %v, want the size refused", len(full), err)
	}
	// The last name trimmed to land on the limit: k "<" (six bytes each) out, 6k-over "a" in.
	over := len(full) - MaxResultSize
	k := (over + 5) / 6
	last := &r.OutputsSkipped[len(r.OutputsSkipped)-1]
	last.Path = last.Path[:len(last.Path)-k] + strings.Repeat("a", 6*k-over)
	if std, _ := json.Marshal(r); len(std) != MaxResultSize {
		t.Fatalf("encoding/json writes %d bytes, want the limit %d", len(std), MaxResultSize)
	}
	b, err := r.Marshal()
	if err != nil || len(b) != MaxResultSize {
		t.Fatalf("Marshal at the limit: %d bytes, %v", len(b), err)
	}
	if _, err := ParseResult(b); err != nil {
		t.Fatalf("ParseResult of %d bytes: %v", len(b), err)
	}
	last.Path += "a"
	if _, err := r.Marshal(); err == nil {
		t.Fatal("Marshal wrote a result one byte over the limit")
	}
}
