package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFront_VersionFromTheFile: `agora version`, in each form the front answers, prints what
// agora-full prints, byte for byte, and without starting agora-full. Which programs started
// is read from the runtime's init trace (GODEBUG=inittrace=1): agora-full's names cobra, which
// the front never links. The forms the front leaves to agora-full still reach it (their errors
// and help are agora-full's).
func TestFront_VersionFromTheFile(t *testing.T) {
	const fullInit = "init github.com/spf13/cobra "
	env := append(os.Environ(), "GODEBUG=inittrace=1")
	for _, args := range [][]string{
		{"version"}, {"version", "-o", "json"}, {"version", "--output", "json"}, {"version", "--output=json"},
		{"version", "-o", "table"}, {"version", "--output=table"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			want := full(t, os.Environ(), args...)
			if want.code != 0 || want.out == "" {
				t.Fatalf("agora-full %v: %+v", args, want)
			}
			got := front(t, env, args...)
			if got.code != want.code || got.out != want.out {
				t.Errorf("the front said %+v, agora-full %+v", got, want)
			}
			if strings.Contains(got.err, fullInit) {
				t.Errorf("agora-full started for %v", args)
			}
		})
	}
	for _, args := range [][]string{
		{"version", "-o", "yaml"}, {"version", "extra"}, {"version", "--help"}, {"version", "-ojson"},
		{"--actor", "x", "version"}, {"version", "-o"}, {"version", "--output="},
	} {
		t.Run("left to agora-full/"+strings.Join(args, " "), func(t *testing.T) {
			want := full(t, os.Environ(), args...)
			got := front(t, env, args...)
			if got.code != want.code || got.out != want.out || !strings.Contains(got.err, fullInit) {
				t.Errorf("%v: the front ended %d %q, agora-full %+v; want agora-full run", args, got.code, got.out, want)
			}
		})
	}
	// An agora-full this process cannot execute is run, so the exec says why, rather than a
	// version printed for a program that cannot start.
	dir := t.TempDir()
	self := filepath.Join(dir, "agora")
	copyFile(t, agoraBin, self, 0o755)
	copyFile(t, filepath.Join(filepath.Dir(agoraBin), fullName), filepath.Join(dir, fullName), 0o644)
	if got := run(t, exec.Command(self, "version")); got.code != 1 || !strings.Contains(got.err, "permission denied") {
		t.Errorf("with agora-full not executable: %+v, want the exec's permission denied", got)
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
