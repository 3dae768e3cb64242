package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/toolreg"
)

// fileRecord is one write a learn view put on record.
type fileRecord struct{ path, op, reason string }

// learnFixture is a fixture whose write_file learns writes outside the workspace; records
// keeps what it put on record, and fail makes the next record fail.
type learnFixture struct {
	*fixture
	scratch *Scratch
	mu      sync.Mutex
	records []fileRecord
	fail    error
}

func newLearnFixture(t *testing.T) *learnFixture {
	t.Helper()
	f := &learnFixture{fixture: newFixture(t, allTools)}
	s, err := NewScratch(t.TempDir(), f.ws)
	mustDo(t, err)
	t.Cleanup(func() { s.Close() })
	f.scratch = s
	f.env.LearnWrites = &LearnWrites{Scratch: s, Record: func(_ context.Context, path, op, reason string) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fail != nil {
			return f.fail
		}
		f.records = append(f.records, fileRecord{path, op, reason})
		return nil
	}}
	f.grant(t, allTools)
	return f
}

func (f *learnFixture) all() []fileRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fileRecord(nil), f.records...)
}

// TestLearnWrite_OutsideTheWorkspace (file.would_deny): in a learn view, each way out
// of the workspace (a path with "..", an absolute path, a link in the workspace leading out,
// a path into /agora or to the worker's own files) is put on record with the path as the
// sandbox names it, then written into the scratch directory, never at the path asked for:
// the tree outside, /etc and /agora are unchanged. A write into .git, and a write inside the
// workspace, are what they always were (refused; written, nothing recorded). Failed before:
// every one of these was refused and nothing was recorded.
func TestLearnWrite_OutsideTheWorkspace(t *testing.T) {
	f := newLearnFixture(t)
	outsideBefore := treeHash(t, f.outside)
	for _, c := range []struct{ path, recorded, scratch, why string }{
		{"../outside/new.txt", "../outside/new.txt", strings.TrimPrefix(filepath.Join(f.outside, "new.txt"), "/"), "climbs out"},
		{"src/../../outside/secret.txt", "../outside/secret.txt", strings.TrimPrefix(filepath.Join(f.outside, "secret.txt"), "/"), "climbs out"},
		{"/etc/agora-learn-test", "/etc/agora-learn-test", "etc/agora-learn-test", "absolute"},
		{f.outside + "/secret.txt", f.outside + "/secret.txt", strings.TrimPrefix(f.outside, "/") + "/secret.txt", "absolute"},
		{"/agora/worker", "/agora/worker", "agora/worker", "absolute"},
		{"/agora/manifest.json", "/agora/manifest.json", "agora/manifest.json", "absolute"},
		{"out/secret.txt", "out/secret.txt", strings.TrimPrefix(filepath.Join(f.ws, "out", "secret.txt"), "/"), "symbolic link"},
		{"etc/agora-learn-test", "etc/agora-learn-test", strings.TrimPrefix(filepath.Join(f.ws, "etc", "agora-learn-test"), "/"), "symbolic link"},
		{"outfile", "outfile", strings.TrimPrefix(filepath.Join(f.ws, "outfile"), "/"), "symbolic link"},
		{"abs/deep/er.txt", "abs/deep/er.txt", strings.TrimPrefix(filepath.Join(f.ws, "abs", "deep", "er.txt"), "/"), "symbolic link"},
	} {
		t.Run(c.path, func(t *testing.T) {
			n := len(f.all())
			content := "learned " + c.path
			res, err := f.call(t, "write_file", map[string]any{"path": c.path, "content": content})
			if err != nil {
				t.Fatalf("write_file %q: %v, want it recorded and written to the scratch directory", c.path, err)
			}
			f.wantDecision(t, "write_file", toolreg.DecisionAllowed, toolreg.ReasonGranted)
			got := f.all()
			if len(got) != n+1 {
				t.Fatalf("%d records, want one more than %d", len(got), n)
			}
			r := got[n]
			if r.path != c.recorded || r.op != "write" || !strings.Contains(r.reason, ReasonOutsideWorkspace) || !strings.Contains(r.reason, c.why) {
				t.Errorf("recorded %+v, want path %q, op write, a reason saying %q", r, c.recorded, c.why)
			}
			b, err := os.ReadFile(filepath.Join(f.scratch.Dir(), c.scratch))
			if err != nil || string(b) != content {
				t.Errorf("the scratch copy %s: %q %v", c.scratch, b, err)
			}
			if !strings.Contains(res.Content, "file.would_deny") || !strings.Contains(res.Content, f.scratch.Dir()) {
				t.Errorf("the model reads %q: it should say the write was recorded and where it went", res.Content)
			}
		})
	}
	if got := treeHash(t, f.outside); got != outsideBefore {
		t.Error("the tree outside the workspace changed")
	}
	for _, p := range []string{"/etc/agora-learn-test", "/agora/worker", "/agora/manifest.json"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it never made", p, err)
		}
	}

	n := len(f.all())
	if _, err := f.call(t, "write_file", map[string]any{"path": ".git/config", "content": "x"}); !isDenied(err, ReasonGitDir) {
		t.Errorf("a write into .git: %v, want it refused as ever", err)
	}
	if _, err := f.call(t, "write_file", map[string]any{"path": "docs/in.md", "content": "x"}); err != nil {
		t.Errorf("a write inside the workspace: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "docs", "in.md")); string(b) != "x" {
		t.Error("a write inside the workspace did not land there")
	}
	if len(f.all()) != n {
		t.Errorf("writes inside the workspace or into .git were recorded: %v", f.all()[n:])
	}
}

// TestLearnWrite_NotRecordedNotWritten: a write whose record fails is not made, and the
// model reads the recorder's error; a path that cannot be recorded whole (a control
// character, over the cap) stays refused, unrecorded.
func TestLearnWrite_NotRecordedNotWritten(t *testing.T) {
	f := newLearnFixture(t)
	f.mu.Lock()
	f.fail = errors.New("the call could not be recorded in the audit log; the dispatch stops")
	f.mu.Unlock()
	_, err := f.call(t, "write_file", map[string]any{"path": "/etc/x", "content": "x"})
	if err == nil || !strings.Contains(err.Error(), "could not be recorded") {
		t.Errorf("a write whose record failed: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(f.scratch.Dir(), "etc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write whose record failed was made: %v", err)
	}
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	for _, p := range []string{"/etc/a\nb", "/etc/\x1b[2Jx", "/" + strings.Repeat("a", maxLearnPath+1)} {
		if _, err := f.call(t, "write_file", map[string]any{"path": p, "content": "x"}); !isDenied(err, ReasonOutsideWorkspace) {
			t.Errorf("write_file %q: %v, want refused", p, err)
		}
	}
	if got := f.all(); len(got) != 0 {
		t.Errorf("recorded %v", got)
	}
}

// TestLearnWrite_ScratchReplaced (attack): the agent, with the worker's uid, moves the
// scratch directory away and puts a link to the workspace (or to the tree outside) in its
// place, hoping learned writes land in the patch or outside. Writes go through the
// directory as it was opened, and a file must sit where it was made: nothing lands in the
// workspace or outside.
func TestLearnWrite_ScratchReplaced(t *testing.T) {
	for _, target := range []string{"ws", "outside"} {
		t.Run(target, func(t *testing.T) {
			f := newLearnFixture(t)
			to := f.ws
			if target == "outside" {
				to = f.outside
			}
			wsBefore, outsideBefore := treeHash(t, f.ws), treeHash(t, f.outside)
			moved := f.scratch.Dir() + ".moved"
			mustDo(t, os.Rename(f.scratch.Dir(), moved))
			mustDo(t, os.Symlink(to, f.scratch.Dir()))
			for _, p := range []string{"/new.txt", "/sub/new.txt", "../new.txt"} {
				f.call(t, "write_file", map[string]any{"path": p, "content": "escaped"}) // refused or made in moved: either way not in the workspace
			}
			if treeHash(t, f.ws) != wsBefore || treeHash(t, f.outside) != outsideBefore {
				t.Error("a learned write landed through the replaced scratch directory")
			}
		})
	}
}

// TestLearnWrite_PlainViewUnchanged: outside learn, a write outside the workspace is refused
// as it always was, and nothing is recorded or made.
func TestLearnWrite_PlainViewUnchanged(t *testing.T) {
	f := newFixture(t, allTools)
	before := treeHash(t, f.outside)
	for _, p := range []string{"../outside/new.txt", "/etc/agora-learn-test", "out/secret.txt"} {
		if _, err := f.call(t, "write_file", map[string]any{"path": p, "content": "x"}); !isDenied(err, ReasonOutsideWorkspace) {
			t.Errorf("write_file %q: %v, want refused", p, err)
		}
	}
	if treeHash(t, f.outside) != before {
		t.Error("the tree outside changed")
	}
}

// TestNewScratch_NotInTheWorkspace: the scratch directory is never made inside the
// workspace (its files would be in the patch).
func TestNewScratch_NotInTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	if _, err := NewScratch(ws, ws); err == nil {
		t.Error("a scratch directory inside the workspace was made")
	}
	if _, err := NewScratch(filepath.Join(ws, "sub"), ws); err == nil {
		t.Error("a scratch directory under a missing parent was made")
	}
}

func isDenied(err error, reason string) bool {
	var de *toolreg.DeniedError
	return errors.As(err, &de) && de.Reason == reason
}
