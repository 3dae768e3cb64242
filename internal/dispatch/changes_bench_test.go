package dispatch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch/gitparse"
	"github.com/agora-dev/agora/internal/verdict"
)

// benchTouched are n realistic repository paths a large patch touches: Go and Python
// sources, tests and docs a few directories deep, nearly all inside benchChanges.
func benchTouched(n int) []verdict.Change {
	out := make([]verdict.Change, 0, n)
	for i := range n {
		var p string
		switch i % 10 {
		case 0:
			p = fmt.Sprintf("docs/guide/section%02d/page%04d.md", i%37, i)
		case 1:
			p = fmt.Sprintf("src/pkg%02d/internal/testdata/case%04d.json", i%23, i)
		case 2:
			p = fmt.Sprintf("src/pkg%02d/sub%02d/file%04d_test.go", i%23, i%11, i)
		default:
			p = fmt.Sprintf("src/pkg%02d/sub%02d/deeper/file%04d.go", i%23, i%11, i)
		}
		out = append(out, verdict.Change{Path: p, OldMode: verdict.ModeFile, NewMode: verdict.ModeFile})
	}
	return out
}

var (
	benchChanges = []string{"src/**", "docs/**/*.md", "{cmd,internal}/**"}
	benchProtect = []string{"**/*_test.go", ".github/**", "src/**/testdata/**"}
)

// BenchmarkChanges measures the gate's changes check of a 10,000-path patch (the allow-list
// and the protect globs over every touched path, as runGate runs it on the tree's changes),
// against, in the same run, the protect check alone over the same paths (the deny-list
// agora ran before) and the parse of diff-index's raw records that the check now reads.
// docs/BENCHMARKS.md records it; the target is at most 50 ms.
//
//	go test -run '^$' -bench BenchmarkChanges -benchmem -count 5 ./internal/dispatch
func BenchmarkChanges(b *testing.B) {
	const n = 10_000
	changed := benchTouched(n)
	touched := make([]string, n)
	var raw []byte
	for i, c := range changed {
		touched[i] = c.Path
		raw = fmt.Appendf(raw, ":100644 100644 %040x %040x M\x00%s\x00", i, i+1, c.Path)
	}
	tree := &gateTree{changes: changed, touched: touched}
	spec := verdict.Spec{Command: []string{"true"}, Changes: benchChanges, Protect: benchProtect}
	b.Run("protect-only", func(b *testing.B) {
		for b.Loop() {
			if _, err := protectedPaths(benchProtect, touched); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse-raw", func(b *testing.B) {
		for b.Loop() {
			if c, err := gitparse.RawDiff(raw); err != nil || len(c) != n {
				b.Fatal(err)
			}
		}
	})
	b.Run("changes", func(b *testing.B) {
		for b.Loop() {
			off, err := admit(context.Background(), spec, tree)
			if err != nil || len(off) != 0 {
				b.Fatalf("%v, %d offences", err, len(off))
			}
		}
	})
	// The same patch with 1% of its paths outside changes, each named.
	outside := append([]verdict.Change{}, changed...)
	for i := 0; i < n; i += 100 {
		outside[i].Path = fmt.Sprintf("tools/gen%04d/main.py", i)
	}
	b.Run("changes-1pct-outside", func(b *testing.B) {
		t := &gateTree{changes: outside}
		for b.Loop() {
			off, err := admit(context.Background(), spec, t)
			if err != nil || len(off) != n/100 {
				b.Fatalf("%v, %d offences", err, len(off))
			}
		}
	})
}

// BenchmarkChangesLinks is the check when the patch leaves symbolic links: a real
// repository of 10,000 files, 100 of them links, patched so 100 links are added inside
// changes; the check reads every link of the patched index (ls-files, cat-file) and resolves
// the new ones. Against, in the same run, diff-index --raw on the same index: the step the
// touched paths come from in every gate.
//
//	go test -run '^$' -bench BenchmarkChangesLinks -benchmem -count 5 ./internal/dispatch
func BenchmarkChangesLinks(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("SKIP: git not installed")
	}
	dir := b.TempDir()
	changed := benchTouched(10_000)
	for i, c := range changed {
		full := filepath.Join(dir, c.Path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if i%100 == 99 {
			if err := os.Symlink(filepath.Base(changed[i-1].Path), full); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gitOut(b, dir, "init", "-q", "-b", "main")
	gitOut(b, dir, "add", "-A")
	gitOut(b, dir, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
	base := gitOut(b, dir, "rev-parse", "HEAD")
	for i := range 100 {
		if err := os.Symlink("../deeper/file0003.go", filepath.Join(dir, fmt.Sprintf("src/pkg%02d/link%03d.go", i%23, i))); err != nil {
			b.Fatal(err)
		}
	}
	gitOut(b, dir, "add", "-A")
	t := &gateTree{dir: dir, base: base}
	ctx := context.Background()
	raw, err := t.git(ctx, nil, "diff-index", "--cached", "-z", "--no-renames", "--raw", "--no-abbrev", base)
	if err != nil {
		b.Fatal(err)
	}
	if t.changes, err = gitparse.RawDiff(raw); err != nil || len(t.changes) != 100 {
		b.Fatalf("%v, %d changes", err, len(t.changes))
	}
	spec := verdict.Spec{Command: []string{"true"}, Changes: benchChanges, Protect: benchProtect}
	b.Run("diff-index", func(b *testing.B) {
		for b.Loop() {
			if _, err := t.git(ctx, nil, "diff-index", "--cached", "-z", "--no-renames", "--raw", "--no-abbrev", base); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("changes-with-links", func(b *testing.B) {
		for b.Loop() {
			off, err := admit(ctx, spec, t)
			// Each new link lands on src/pkgNN/deeper/file0003.go: inside changes.
			if err != nil || len(off) != 0 {
				b.Fatalf("%v, %v", err, off)
			}
		}
	})
}
