package retention_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/retention"
)

// benchHome is a home of n dispatches that ended 100 days ago, each with an input and a patch
// blob of its own (2n blobs), dated long ago. Files are written directly (no fsync per blob)
// to keep the set-up short; their names and modes are the store's.
func benchHome(b *testing.B, n int) (*testHome, []string) {
	h := newHome(b)
	tx, err := h.db.SQL().Begin()
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox, network,
		input_digest, timeout_ms, actor, created_at, ended_at, result) VALUES (?, 'finished', 'fixer',
		'sha256:0000000000000000000000000000000000000000000000000000000000000000', '[]', 'local', 'bwrap', 'none', ?, 1000,
		'alice', ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	var paths []string
	write := func(content string) digest.Digest {
		d := digest.Sum([]byte(content))
		p := h.blobPath(d)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(content), 0o400); err != nil {
			b.Fatal(err)
		}
		os.Chtimes(p, longAgo, longAgo)
		paths = append(paths, p)
		return d
	}
	ended := ago(100)
	for i := range n {
		id := "d" + strconv.Itoa(i)
		in, patch := write("input "+id), write("patch "+id)
		if _, err := ins.Exec(id, string(in), ended, ended, `{"outputs":[],"patch":{"digest":"`+string(patch)+`","size":10}}`); err != nil {
			b.Fatal(err)
		}
	}
	ins.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return h, paths
}

// BenchmarkGC: `agora gc` over 100,000 local blobs (50,000 dispatches), its dry run (the plan
// alone), and the floor: os.Remove of the same files with no plan, record or audit.
//
//	go test -run '^$' -bench 'BenchmarkGC' -benchtime 1x -count 3 -benchmem ./internal/retention
func BenchmarkGC(b *testing.B) {
	const dispatches = 50_000
	for _, mode := range []string{"remove-floor", "dry-run", "gc"} {
		b.Run(fmt.Sprintf("%s/blobs=%d", mode, 2*dispatches), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				h, paths := benchHome(b, dispatches)
				s := h.sweeper(policy)
				b.StartTimer()
				switch mode {
				case "remove-floor":
					for _, p := range paths {
						if err := os.Remove(p); err != nil {
							b.Fatal(err)
						}
					}
				case "dry-run":
					p, err := s.Plan(context.Background())
					if err != nil || len(p.Items) != 2*dispatches {
						b.Fatalf("plan: %v, %d items", err, len(p.Items))
					}
				case "gc":
					_, res, err := s.Run(context.Background(), "alice", retention.RoleOperator, nil)
					if err != nil || res.Deleted != 2*dispatches {
						b.Fatalf("gc: %v, %+v", err, res)
					}
				}
			}
		})
	}
}
