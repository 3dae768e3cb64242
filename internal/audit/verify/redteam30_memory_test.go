package verify_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// `agora verify` is run by third parties on bundles from anyone, and its target holds it to
// memory under 3x the file. A bundle of empty entries ({} is 3 bytes, an
// Entry 80) would hold ~117x its size, and a 33 MB one, far under MaxBundleSize, ran verify out of
// memory (fatal error, exit 2).

func tinyBundle(n int, entry func(i int) string) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"format":"agora-audit-bundle/v3","entries":[`)
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(entry(i))
	}
	buf.WriteString(`],"manifests":[]}`)
	return buf.Bytes()
}

// liveAfter returns the heap that parse and verify of data leave live, with the report.
func liveAfter(t *testing.T, data []byte) (int64, *verify.Report, error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b, err := verify.ParseBundleBytes(data)
	var rep *verify.Report
	if err == nil {
		rep = verify.Verify(b, verify.Options{})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(b)
	runtime.KeepAlive(rep)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), rep, err
}

func TestRedTeam30_TinyEntriesRefusedBeforeParsing(t *testing.T) {
	data := tinyBundle(200_000, func(int) string { return "{}" })
	live, _, err := liveAfter(t, data)
	if !errors.Is(err, verify.ErrBundle) || !strings.Contains(err.Error(), "objects and lists in") {
		t.Fatalf("a bundle of 200,000 empty entries: err = %v; want it refused as too dense", err)
	}
	if limit := 3*int64(len(data)) + 16<<20; live > limit {
		t.Errorf("the refusal left %d MB live, over 3x the file + 16 MB", live>>20)
	}
}

// Entries just sparse enough to be parsed (two nodes in ~130 bytes) that all fail: the report
// lists the first failures and counts the rest, so it stays within 3x the file too.
func TestRedTeam30_ManyFailingEntriesMemoryAndSummary(t *testing.T) {
	const n = 100_000
	hash := strings.Repeat("A", 43) + "="
	data := tinyBundle(n, func(i int) string {
		return fmt.Sprintf(`{"index":%d,"entry":"e30=","leaf_hash":"%s","inclusion_proof":[%q]}`, i, hash, hash)
	})
	live, rep, err := liveAfter(t, data)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if rep.OK {
		t.Fatal("a bundle of entries whose leaf hashes are zeros verified")
	}
	if limit := 3*int64(len(data)) + 16<<20; live > limit {
		t.Errorf("a %d-byte bundle of %d failing entries holds %d MB after parse and verify, over 3x the file + 16 MB (%d MB)", len(data), n, live>>20, limit>>20)
	}
	failed := rep.Failed()
	if len(failed) > 3*1000 {
		t.Errorf("%d failed rows listed; want the entry failures capped", len(failed))
	}
	last := failed[len(failed)-1]
	found := false
	for _, r := range failed {
		if strings.Contains(r.Detail, "more failed entry and inclusion checks, not listed") {
			found = true
		}
	}
	if !found {
		t.Errorf("no row counts the failures not listed; last failed row: %+v", last)
	}
}
