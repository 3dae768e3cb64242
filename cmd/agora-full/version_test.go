package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestVersion_E2E builds the real binary from this checkout with VCS stamping and asks it its version: the
// commit and its time are the checkout's HEAD, read from the build information. A
// binary built with -buildvcs=false says it has no VCS information.
func TestVersion_E2E(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("SKIP: git not installed (the test compares with the checkout's HEAD)")
	}
	head, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("SKIP: not in a git checkout: %v", err)
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		// cmd/go looks for a .git directory; a worktree's or submodule's .git is a file.
		t.Skip("SKIP: go build stamps VCS information only where .git is a directory; this checkout is a git worktree or submodule")
	}
	when, err := exec.Command(git, "log", "-1", "--format=%cI", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	commitTime, err := time.Parse(time.RFC3339, strings.TrimSpace(string(when)))
	if err != nil {
		t.Fatal(err)
	}

	// -buildvcs=true: a go env with GOFLAGS=-buildvcs=false (this CI machine's) would drop it.
	bin, cleanup, err := agoratest.BuildBinaryFlags("-buildvcs=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("agora version -o json: %v", err)
	}
	var v struct {
		Version  string `json:"version"`
		Revision string `json:"revision"`
		Time     string `json:"time"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := strings.TrimSpace(string(head)); v.Revision != want {
		t.Errorf("revision %q, want HEAD %q\n%s", v.Revision, want, out)
	}
	if got, err := time.Parse(time.RFC3339, v.Time); err != nil || !got.Equal(commitTime) {
		t.Errorf("time %q, want HEAD's commit time %s (%v)", v.Time, commitTime, err)
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "commit "+v.Revision) {
		t.Errorf("text lacks the commit:\n%s", text)
	}

	bare, cleanupBare, err := agoratest.BuildBinaryFlags("-buildvcs=false")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanupBare)
	text, err = exec.Command(bare, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "commit unknown: built without VCS information") || strings.Contains(string(text), v.Revision) {
		t.Errorf("a -buildvcs=false binary:\n%s", text)
	}
}
