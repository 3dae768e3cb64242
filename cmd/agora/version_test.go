package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFront_VersionFromTheFile: `agora version`, in each form the front answers, prints what
// agora-full prints, byte for byte, and without starting agora-full: beside a copy of the front
// agora-full is readable but not executable, so an exec of it would fail. The forms the front
// leaves to agora-full still reach it (their errors and help are agora-full's).
func TestFront_VersionFromTheFile(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "agora")
	copyFile(t, agoraBin, self, 0o755)
	copyFile(t, filepath.Join(filepath.Dir(agoraBin), fullName), filepath.Join(dir, fullName), 0o644)
	for _, args := range [][]string{
		{"version"}, {"version", "-o", "json"}, {"version", "--output", "json"}, {"version", "--output=json"},
		{"version", "-o", "table"}, {"version", "--output=table"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			want := full(t, os.Environ(), args...)
			if want.code != 0 || want.out == "" {
				t.Fatalf("agora-full %v: %+v", args, want)
			}
			got := run(t, exec.Command(self, args...))
			if got != want {
				t.Errorf("the front said %+v, agora-full %+v", got, want)
			}
		})
	}
	// Not the front's: agora-full is run for them, and here it cannot be.
	for _, args := range [][]string{
		{"version", "-o", "yaml"}, {"version", "extra"}, {"version", "--help"}, {"version", "-ojson"},
		{"--actor", "x", "version"}, {"version", "-o"}, {"version", "--output="},
	} {
		t.Run("left to agora-full/"+strings.Join(args, " "), func(t *testing.T) {
			got := run(t, exec.Command(self, args...))
			if got.code != 1 || !strings.Contains(got.err, "permission denied") {
				t.Errorf("%v: %+v, want the exec of the unexecutable agora-full to fail", args, got)
			}
		})
	}
	// An agora-full the build information cannot be read from (not a Go program) is run.
	if err := os.Remove(filepath.Join(dir, fullName)); err != nil {
		t.Fatal(err)
	}
	mark := plantFull(t, dir)
	if got := run(t, exec.Command(self, "version")); got.out != "planted\n" {
		t.Errorf("with a script as agora-full: %+v, want the script run", got)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the script did not run: %v", err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

func TestVersionOutput(t *testing.T) {
	for _, c := range []struct {
		args   []string
		output string
		ok     bool
	}{
		{[]string{"version"}, "table", true},
		{[]string{"version", "-o", "json"}, "json", true},
		{[]string{"version", "--output", "table"}, "table", true},
		{[]string{"version", "--output=json"}, "json", true},
		{[]string{"version", "-o", "JSON"}, "", false},
		{[]string{"version", "-o=json"}, "", false},
		{[]string{"version", "--output"}, "", false},
		{[]string{"version", "json"}, "", false},
		{[]string{"versions"}, "", false},
		{[]string{}, "", false},
		{[]string{"dispatch", "version"}, "", false},
		{[]string{"version", "-o", "json", "-o", "json"}, "", false},
	} {
		output, ok := versionOutput(c.args)
		if ok != c.ok || (ok && output != c.output) {
			t.Errorf("versionOutput(%q) = %q, %v; want %q, %v", c.args, output, ok, c.output, c.ok)
		}
	}
}
