package worker

import (
	"os"
	"testing"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// BenchmarkWorkerNoop runs the whole worker for the command `true` on an empty workspace:
// verify, baseline, the agent, capture, outputs and the result. An empty workspace that stays
// empty runs no git (the baseline is the empty tree, the patch empty). It reports the mean
// time of each phase next to the total.
//
// In the sandbox /tmp (the baseline repository) is a tmpfs; the "tmp=tmpfs" case uses
// /dev/shm to match, "tmp=disk" a directory next to the workspace.
func BenchmarkWorkerNoop(b *testing.B) {
	b.Run("tmp=tmpfs", func(b *testing.B) {
		if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
			b.Skip("SKIP: no /dev/shm tmpfs")
		}
		tmp, err := os.MkdirTemp("/dev/shm", "agora-worker-bench-")
		if err != nil {
			b.Skip("SKIP: /dev/shm not writable: ", err)
		}
		b.Cleanup(func() { os.RemoveAll(tmp) })
		benchNoop(b, tmp)
	})
	b.Run("tmp=disk", func(b *testing.B) { benchNoop(b, b.TempDir()) })
}

func benchNoop(b *testing.B, tmp string) {
	f := newFixture(b, "")
	f.command = []string{"true"}
	f.caps = []testCap{{name: "noop", yaml: "commands:\n  - true\n"}}
	f.write()
	opts := options{Root: f.root, TempDir: tmp}
	sums := map[string]int64{}
	b.ResetTimer()
	for b.Loop() {
		if code := run(b.Context(), opts); code != 0 {
			b.Fatalf("exit code %d", code)
		}
		b.StopTimer()
		raw, err := os.ReadFile(f.outPath(wire.ResultFile))
		if err != nil {
			b.Fatal(err)
		}
		res, err := wire.ParseResult(raw)
		if err != nil || res.Status != wire.StatusOK {
			b.Fatalf("result %+v, %v", res, err)
		}
		for _, p := range res.Phases {
			sums[p.Name] += p.MS
		}
		b.StartTimer()
	}
	for _, name := range []string{wire.PhaseVerify, wire.PhaseBaseline, wire.PhaseRuntime, wire.PhaseCapture} {
		b.ReportMetric(float64(sums[name])/float64(b.N), name+"-ms/op")
	}
}
