package verify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/verify"
)

func TestDecodeEntry(t *testing.T) {
	const good = `{"actor":"alice","details":{"digest":"sha256:ab","n":3},"kind":"catalog.register","seq":7,"subject":"capability/x","time":"2026-01-02T03:04:05.5Z"}`
	got, err := verify.DecodeEntry([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := verify.EntryFields{Seq: 7, Time: time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC), Actor: "alice", Kind: "catalog.register",
		Subject: "capability/x", Details: map[string]any{"digest": "sha256:ab", "n": int64(3)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entry (-want +got):\n%s", diff)
	}
	tests := []struct {
		name, entry, want string
	}{
		{"spaces", strings.Replace(good, `"actor":"alice"`, `"actor": "alice"`, 1), "not canonical"},
		{"keys out of order", `{"details":{},"actor":"a","kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`, "not canonical"},
		{"duplicate key", `{"actor":"a","actor":"b","details":{},"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`, "not canonical"},
		{"fraction", strings.Replace(good, `"n":3`, `"n":3.5`, 1), "only integral numbers"},
		{"extra key", `{"actor":"a","details":{},"extra":1,"kind":"k","seq":0,"subject":"s","time":"2026-01-02T03:04:05Z"}`, "keys other than"},
		{"missing key", `{"actor":"a","details":{},"kind":"k","seq":0,"time":"2026-01-02T03:04:05Z"}`, "keys other than"},
		{"seq negative", strings.Replace(good, `"seq":7`, `"seq":-7`, 1), "not a non-negative integer"},
		{"seq string", strings.Replace(good, `"seq":7`, `"seq":"7"`, 1), "seq is not a number"},
		{"bad time", strings.Replace(good, `2026-01-02T03:04:05.5Z`, `yesterday`, 1), "not RFC 3339"},
		{"details not object", strings.Replace(good, `{"digest":"sha256:ab","n":3}`, `[]`, 1), "details an object"},
		{"not JSON", `{`, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verify.DecodeEntry([]byte(tt.entry))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestKindMatches(t *testing.T) {
	tests := []struct {
		pattern, kind string
		want          bool
	}{
		{"catalog.register", "catalog.register", true},
		{"catalog.register", "catalog.retire", false},
		{"catalog.*", "catalog.register", true},
		{"catalog.*", "catalogue.register", false},
		{"catalog*", "catalog.register", false},
		{"*", "catalog.register", false},
	}
	for _, tt := range tests {
		if got := verify.KindMatches(tt.pattern, tt.kind); got != tt.want {
			t.Errorf("KindMatches(%q, %q) = %v, want %v", tt.pattern, tt.kind, got, tt.want)
		}
	}
}
