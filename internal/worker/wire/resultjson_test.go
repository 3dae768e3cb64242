package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// tricky holds what encoding/json escapes: quotes, backslashes, control bytes, HTML's
// characters, invalid UTF-8, U+2028 and U+2029, and plain multi-byte text.
var tricky = []string{
	"", "plain", `"quoted" \ back\slash`, "\x00\x01\b\f\n\r\t\x1f\x7f", "<a href=x>&amp;</a>",
	"bad \xff\xfe utf-8 \xc3", "line\u2028para\u2029end", "héllo wörld ✓ 日本", "\xed\xa0\x80 surrogate",
}

// resultFrom builds a Result from fuzzed parts, every optional part present or not.
func resultFrom(s1, s2, s3 string, n int64, flags uint8) Result {
	r := Result{Version: int(n % 7), Status: Status(s1), Reason: Reason(s2), Detail: s3, ExitCode: int(n)}
	if flags&1 != 0 {
		r.Phases = []Phase{{Name: s1, OK: true, MS: n}, {Name: s3, MS: -n}}
	} else if flags&2 != 0 {
		r.Phases = []Phase{}
	}
	if flags&4 != 0 {
		r.Patch = &PatchInfo{Path: s2, SHA256: s3, Bytes: n, FilesChanged: int(n / 3)}
	}
	if flags&8 != 0 {
		r.Outputs = []OutputInfo{{Path: s1, Size: n, SHA256: s2}, {Path: s3}}
	} else if flags&16 != 0 {
		r.Outputs = []OutputInfo{}
	}
	if flags&32 != 0 {
		r.OutputsSkipped = []SkippedOutput{{Path: s3, Why: s1}}
	}
	if flags&64 != 0 {
		r.Transcript = &FileInfo{Path: s1, Size: n, SHA256: s3}
	}
	if flags&128 != 0 {
		r.Final = &FileInfo{Path: s2, Size: -n, SHA256: s1}
	}
	return r
}

func checkAppendResult(t *testing.T, r Result) {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendResult(nil, &r); !bytes.Equal(got, want) {
		t.Fatalf("appendResult(%+v)\n got %s\nwant %s", r, got, want)
	}
}

func TestAppendResult_AsEncodingJSON(t *testing.T) {
	for _, s := range tricky {
		for flags := range 256 {
			checkAppendResult(t, resultFrom(s, tricky[flags%len(tricky)], s+"|"+tricky[(flags/3)%len(tricky)], int64(flags*7919-1000), uint8(flags)))
		}
	}
}

// The worker's own result, through Marshal, parses back as it was.
func TestMarshal_RoundTrips(t *testing.T) {
	r := Result{Version: ResultVersion, Status: StatusOK, ExitCode: 0,
		Phases:  []Phase{{Name: PhaseVerify, OK: true, MS: 2}, {Name: PhaseRuntime, OK: true, MS: 10}},
		Patch:   &PatchInfo{Path: PatchFile, SHA256: "0000000000000000000000000000000000000000000000000000000000000000", Bytes: 12, FilesChanged: 1},
		Outputs: []OutputInfo{{Path: OutputsDir + "/a <b>.txt", Size: 3, SHA256: "1111111111111111111111111111111111111111111111111111111111111111"}}}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseResult(b)
	if err != nil {
		t.Fatalf("ParseResult(%s): %v", b, err)
	}
	if got.Patch == nil || *got.Patch != *r.Patch || len(got.Outputs) != 1 || got.Outputs[0] != r.Outputs[0] || len(got.Phases) != 2 {
		t.Errorf("round trip: %+v, want %+v", got, r)
	}
}

func FuzzAppendResult(f *testing.F) {
	for i, s := range tricky {
		f.Add(s, tricky[(i+1)%len(tricky)], tricky[(i+2)%len(tricky)], int64(i*1000-3), uint8(i*37))
	}
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, n int64, flags uint8) {
		checkAppendResult(t, resultFrom(s1, s2, s3, n, flags))
	})
}
