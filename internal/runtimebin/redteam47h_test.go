package runtimebin

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRedTeam47H_RelativePathEntriesFindNothing: the hand-off compares PATH as a string and
// no directory, and a script or cron job now gets a resident's dispatch whatever its
// directory. A relative PATH entry ("", ".", "bin") would find the agent CLI in the CLI's
// directory cold and in the resident's directory handed off: it finds nothing in either.
func TestRedTeam47H_RelativePathEntriesFindNothing(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, sub, "claude"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for _, path := range []string{"", ".", "bin", "./bin", ":", "::bin", "../" + filepath.Base(dir)} {
		if p, err := lookPath("claude", path); err == nil {
			t.Errorf("PATH %q finds %s, which depends on the directory", path, p)
		}
	}
	if p, err := lookPath("claude", "/nonexistent:"+filepath.Join(dir, "bin")); err != nil || p != filepath.Join(dir, "bin", "claude") {
		t.Errorf("an absolute entry: %q, %v", p, err)
	}
}
