package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestRedTeam44R_BindFinal: a review is read from the final answer the reviewer's worker
// vouched for, whose digest the dispatch's terminal entry (final_digest) and its manifest
// (products.final) both name. A manifest that drops it, names another, or names one its
// entry does not, does not bind: a bundle cannot hide which answer a review was read from,
// nor claim one the log never recorded. Both absent (no vouched answer, or a dispatch from
// before they were recorded) binds as before.
func TestRedTeam44R_BindFinal(t *testing.T) {
	const final = "sha256:" + "f1"
	manifest := func(products string) []byte {
		return []byte(`{"dispatch":"d1","subagent":"r@sha256:aa","envs":[],"input_digest":"sha256:bb","state":"finished",` +
			`"inputs":[],"products":` + products + `}`)
	}
	digest := func(b []byte) string {
		sum := sha256.Sum256(b)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	for _, tt := range []struct {
		name     string
		products string
		entry    string // the terminal entry's final_digest, "" for none
		want     string // "" when it binds
	}{
		{"both name it", `{"patch":"","outputs":[],"final":"` + final + `"}`, final, ""},
		{"neither names one", `{"patch":"","outputs":[]}`, "", ""},
		{"the manifest drops it", `{"patch":"","outputs":[]}`, final, "records final answer"},
		{"the manifest names another", `{"patch":"","outputs":[],"final":"sha256:0000"}`, final, "records final answer"},
		{"the entry names none", `{"patch":"","outputs":[],"final":"` + final + `"}`, "", "records final answer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := manifest(tt.products)
			end := &EntryFields{Seq: 5, Kind: "dispatch.finished", Details: map[string]any{"manifest": digest(raw)}}
			if tt.entry != "" {
				end.Details["final_digest"] = tt.entry
			}
			acc := &EntryFields{Seq: 1, Kind: "dispatch.accepted", Details: map[string]any{"subagent": "r@sha256:aa", "input_digest": "sha256:bb", "envs": []any{}}}
			rv := &runVerifier{}
			_, err := rv.bind(raw, map[string]*attempt{"d1": {accepted: []*EntryFields{acc}, terminal: []*EntryFields{end}}})
			if tt.want == "" && err != nil {
				t.Fatalf("bind: %v", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("bind: %v, want an error with %q", err, tt.want)
			}
		})
	}
}
