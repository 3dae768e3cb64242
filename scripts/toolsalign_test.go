package scripts_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runToolsAlign runs `go run toolsalign.go -C root` and returns its output and exit code.
func runToolsAlign(t *testing.T, root string) (string, int) {
	t.Helper()
	cmd := exec.Command("go", "run", "toolsalign.go", "-C", root)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("go run toolsalign.go: %v\n%s", err, &out)
		return "", 0
	}
}

// TestToolModules_OneVersionPerContent: the tools modules the set-up builds (scripts/*-tools)
// require every module whose content they share at one version, so that Go's build cache,
// which under -trimpath keys a package by that version, compiles each shared package once.
func TestToolModules_OneVersionPerContent(t *testing.T) {
	out, code := runToolsAlign(t, "..")
	if code != 0 {
		t.Fatalf("toolsalign = exit %d: a tools module's go.mod requires a shared module at a version of its own; run go run scripts/toolsalign.go -w\n%s", code, out)
	}
}

// TestToolsAlign_FindsOneContentUnderTwoVersions: the check fails, naming the module and each
// version, when two tools modules build x/net v0.51.0's files but require it at two versions;
// one that builds other content (by a replace of its very version, too), or a directory, is
// not a mismatch.
func TestToolsAlign_FindsOneContentUnderTwoVersions(t *testing.T) {
	root := t.TempDir()
	write := func(dir, gomod string) {
		if err := os.MkdirAll(filepath.Join(root, "scripts", dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "scripts", dir, "go.mod"), []byte(gomod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a-tools", "module a\n\ngo 1.26.0\n\nrequire (\n\tgolang.org/x/net v0.51.0\n\tgolang.org/x/sys v0.46.0\n\texample.com/local v1.0.0\n)\n\nreplace example.com/local => ./local\n")
	write("b-tools", "module b\n\ngo 1.26.0\n\nrequire (\n\tgolang.org/x/net v0.58.0\n\tgolang.org/x/sys v0.47.0\n\texample.com/local v1.1.0\n)\n\nreplace golang.org/x/net => golang.org/x/net v0.51.0\n\nreplace example.com/local => ./local\n")
	// c-tools replaces every x/net to v0.51.0 but its own v0.58.0 to itself: a replace of the
	// very version wins, as in Go, so it builds v0.58.0's files and shares nothing.
	write("c-tools", "module c\n\ngo 1.26.0\n\nrequire golang.org/x/net v0.58.0\n\nreplace golang.org/x/net v0.58.0 => golang.org/x/net v0.58.0\n\nreplace golang.org/x/net => golang.org/x/net v0.51.0\n")
	out, code := runToolsAlign(t, root)
	if code != 1 {
		t.Fatalf("toolsalign = exit %d, want 1\n%s", code, out)
	}
	want := "golang.org/x/net (content golang.org/x/net@v0.51.0): v0.51.0 in a-tools, v0.58.0 in b-tools"
	if !strings.Contains(out, want) {
		t.Errorf("toolsalign said\n%s\nwant a line %q", out, want)
	}
	if strings.Contains(out, "c-tools") {
		t.Errorf("toolsalign counts c-tools, whose versioned replace gives it other files\n%s", out)
	}
	// x/sys: two contents (v0.46.0 and v0.47.0), nothing shared; example.com/local: a directory.
	for _, not := range []string{"golang.org/x/sys", "example.com/local"} {
		if strings.Contains(out, not) {
			t.Errorf("toolsalign names %s, which the two modules do not build from one content\n%s", not, out)
		}
	}
	if !strings.Contains(out, "1 of the shared modules are built from one content") {
		t.Errorf("toolsalign did not count one mismatch\n%s", out)
	}
}
