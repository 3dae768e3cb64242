package verify

import (
	"reflect"
	"strings"
	"testing"
)

const fastGood = `{"actor":"alice","details":{"a":[1,-2,true,false,null,"x",{}],"digest":"sha256:ab","n":9007199254740992},"kind":"catalog.register","seq":7,"subject":"capability/x","time":"2026-01-02T03:04:05.5Z"}`

// fastSeeds are entries decodeCanonical takes and near misses it must leave to the slow
// reading: every non-canonical form the slow reading refuses, and canonical forms outside
// the fast subset (escapes, non-ASCII) that it accepts.
var fastSeeds = []string{
	fastGood,
	`{"actor":"","details":{},"kind":"","seq":0,"subject":"","time":"2026-01-02T03:04:05Z"}`,
	strings.Replace(fastGood, `"n":9007199254740992`, `"n":9007199254740993`, 1),
	strings.Replace(fastGood, `"n":9007199254740992`, `"n":-9007199254740992`, 1),
	strings.Replace(fastGood, `"n":9007199254740992`, `"n":-0`, 1),
	strings.Replace(fastGood, `"n":9007199254740992`, `"n":0`, 1),
	strings.Replace(fastGood, `"n":9007199254740992`, `"n":01`, 1),
	strings.Replace(fastGood, `"n":9007199254740992`, `"n":1.0`, 1),
	strings.Replace(fastGood, `"n":9007199254740992`, `"n":1e3`, 1),
	strings.Replace(fastGood, `"n":9007199254740992`, `"n":12345678901234567890`, 1),
	strings.Replace(fastGood, `"digest"`, `"a"`, 1),
	strings.Replace(fastGood, `"x"`, `"\u00e9"`, 1),
	strings.Replace(fastGood, `"x"`, `"é"`, 1),
	strings.Replace(fastGood, `"x"`, `"\n"`, 1),
	strings.Replace(fastGood, `"x"`, `"\u000a"`, 1),
	strings.Replace(fastGood, `"x"`, `"\/"`, 1),
	strings.Replace(fastGood, `"x"`, "\"\x7f\"", 1),
	strings.Replace(fastGood, `"x"`, "\"\xff\"", 1),
	strings.Replace(fastGood, `"seq":7`, `"seq":-7`, 1),
	strings.Replace(fastGood, `"seq":7`, `"seq":"7"`, 1),
	strings.Replace(fastGood, `"seq":7`, `"seq":7.0`, 1),
	strings.Replace(fastGood, `"time":"2026-01-02T03:04:05.5Z"`, `"time":"now"`, 1),
	strings.Replace(fastGood, `"time":"2026-01-02T03:04:05.5Z"`, `"time":5`, 1),
	strings.Replace(fastGood, `"actor":"alice",`, ``, 1),
	strings.Replace(fastGood, `"actor":"alice"`, `"actor":"alice","actor":"bob"`, 1),
	strings.Replace(fastGood, `"actor":"alice"`, `"actor": "alice"`, 1),
	strings.Replace(fastGood, `"actor":"alice"`, `"actor":null`, 1),
	strings.Replace(fastGood, `"subject":"capability/x",`, `"subject":"capability/x","t":1,`, 1),
	fastGood + " ",
	fastGood + "{}",
	" " + fastGood,
	`{"actor":"a","details":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `,"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`{"actor":"a","details":{"k":tru},"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`[]`, `{`, `{}`, ``, `"x"`, `-`,
}

func TestDecodeCanonical_MatchesSlow(t *testing.T) {
	if _, ok := decodeCanonical([]byte(fastGood)); !ok {
		t.Fatal("the fast path does not take a canonical entry: it is never used")
	}
	for i, s := range fastSeeds {
		matchSlow(t, i, []byte(s))
	}
}

// FuzzDecodeEntry_FastMatchesSlow: the fast path never panics and takes only entries the
// slow reading takes, with the same fields.
func FuzzDecodeEntry_FastMatchesSlow(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { matchSlow(t, 0, b) })
}

func matchSlow(t *testing.T, i int, b []byte) {
	t.Helper()
	fast, ok := decodeCanonical(b)
	if !ok {
		return
	}
	slow, err := decodeEntrySlow(b)
	if err != nil {
		t.Fatalf("seed %d: the fast path took an entry the slow reading refuses: %v", i, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("seed %d: fast %+v, slow %+v", i, fast, slow)
	}
}
