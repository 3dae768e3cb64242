package verify

import (
	"strings"
	"testing"
)

// summarySeeds add details.manifest in every position the summary must tell apart: a string
// at the top of details (kept), any other value there, and a "manifest" deeper down (neither
// kept).
var summarySeeds = append(append([]string{}, fastSeeds...),
	strings.Replace(fastGood, `"digest":"sha256:ab"`, `"digest":"sha256:ab","manifest":"sha256:cd"`, 1),
	strings.Replace(fastGood, `"digest":"sha256:ab"`, `"digest":"sha256:ab","manifest":7`, 1),
	strings.Replace(fastGood, `"digest":"sha256:ab"`, `"digest":"sha256:ab","manifest":{"manifest":"x"}`, 1),
	strings.Replace(fastGood, `"digest":"sha256:ab"`, `"digest":"sha256:ab","manifest":null`, 1),
	strings.Replace(fastGood, `"digest":"sha256:ab"`, `"digest":"sha256:ab","manifest":"a\u0041"`, 1),
	strings.Replace(fastGood, `"digest":"sha256:ab"`, `"digest":"sha256:ab","manifest":"x","manifest":"y"`, 1),
	strings.Replace(fastGood, `"a":[1,-2,true,false,null,"x",{}]`, `"a":[{"manifest":"x"}]`, 1),
	`{"actor":"a","details":{"manifest":"m"},"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`{"actor":"a","details":{"manifest":"m"},"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z","z":1}`,
	`{"actor":"a","details":{"manifest":"m"},"kind":"k","seq":0,"subject":"s"}`,
	`{"actor":"a","details":[],"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`{"actor":"a","details":{},"kind":"k","seq":-1,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`{"actor":"a","details":{},"kind":"k","seq":9007199254740992,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`{"actor":"a","details":{},"kind":7,"seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`{"actor":"a","details":{"d":`+strings.Repeat(`{"d":`, 30)+`1`+strings.Repeat("}", 30)+`},"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`{"actor":"a","details":{"d":`+strings.Repeat(`{"d":`, 31)+`"manifest"`+strings.Repeat("}", 31)+`},"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
	`{"actor":"a","details":`+strings.Repeat(`{"manifest":`, 32)+`"m"`+strings.Repeat("}", 32)+`,"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`,
)

func TestDecodeSummary_MatchesCanonical(t *testing.T) {
	took := 0
	for i, s := range summarySeeds {
		if matchCanonical(t, i, []byte(s)) {
			took++
		}
	}
	if took < 5 {
		t.Fatalf("the summary took %d seeds: it is hardly used", took)
	}
	s, ok := decodeSummary([]byte(summarySeeds[len(fastSeeds)]))
	if !ok || !s.hasManifest || s.manifest != "sha256:cd" {
		t.Fatalf("details.manifest not kept: %+v, %v", s, ok)
	}
}

// matchCanonical fails t unless decodeSummary takes b exactly when decodeCanonical does, with
// the summary of its fields; it reports whether it took b.
func matchCanonical(t *testing.T, i int, b []byte) bool {
	t.Helper()
	s, ok := decodeSummary(b)
	f, okC := decodeCanonical(b)
	if len(b) > MaxEntrySize {
		okC = false
	}
	if ok != okC {
		t.Fatalf("seed %d %.80q: summary took it %v, decodeCanonical %v", i, b, ok, okC)
	}
	if ok && s != summaryOf(f) {
		t.Fatalf("seed %d: summary %+v, decoded %+v", i, s, summaryOf(f))
	}
	return ok
}

// FuzzDecodeSummary_MatchesCanonical: decodeSummary reads an entry's bytes; it never panics
// and takes exactly what decodeCanonical takes, with the same seq, kind, subject and
// details.manifest.
func FuzzDecodeSummary_MatchesCanonical(f *testing.F) {
	for _, s := range summarySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { matchCanonical(t, 0, b) })
}
