package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

// TestRedTeam30_ManifestRowsSameOnEveryCPUCount: checkEntries says a large bundle checked on
// every CPU gives the report of a sequential run. A manifest recorded by two entries that fall
// in different chunks was named by the last one sequentially and by the first chunk's in
// parallel: the same bundle's report differed between machines (failed before: "recorded by
// entry 0" on 2 CPUs, "entry 1199" on 1).
func TestRedTeam30_ManifestRowsSameOnEveryCPUCount(t *testing.T) {
	manifest := []byte(`{"m":1}`)
	sum := sha256.Sum256(manifest)
	ref := "sha256:" + hex.EncodeToString(sum[:])
	b := &Bundle{Format: Format, Manifests: []Manifest{{Manifest: manifest}}}
	const n = 1200
	for i := range n {
		details := `{}`
		if i == 0 || i == n-1 {
			details = `{"manifest":"` + ref + `"}`
		}
		body := []byte(fmt.Sprintf(`{"actor":"a","details":%s,"kind":"k","seq":%d,"subject":"s","time":"2026-11-24T09:50:00Z"}`, details, i))
		b.Entries = append(b.Entries, Entry{Index: uint64(i), Entry: body, LeafHash: LeafHash(body)})
	}
	b.Selection.Count = n
	rows := func(procs int) []Result {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		var out []Result
		for _, r := range Verify(b, Options{}).Checks {
			if r.Check == CheckManifest {
				out = append(out, r)
			}
		}
		return out
	}
	one, many := rows(1), rows(4)
	if len(one) == 0 || !reflect.DeepEqual(one, many) {
		t.Fatalf("manifest rows on 1 CPU %+v, on 4 CPUs %+v", one, many)
	}
}
