// Package scripts_test runs the shell scripts' testable steps in a controlled environment.
package scripts_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nobody is the unprivileged uid and gid the non-root cases run as when the test is root.
const nobody = 65534

// Stubs stand in for the tools prereqs.sh looks for; apt-get and sudo append their argv (and
// the DEBIAN_FRONTEND apt-get sees) to $STUB_LOG, and sudo then runs the rest of its argv.
const (
	stubPresent = "#!/bin/sh\nexit 0\n"
	stubAptGet  = "#!/bin/sh\necho \"apt-get $* (DEBIAN_FRONTEND=${DEBIAN_FRONTEND-})\" >>\"$STUB_LOG\"\n"
	stubSudo    = `#!/bin/sh
echo "sudo $*" >>"$STUB_LOG"
while :; do
	case $1 in
	-n) shift ;;
	*=*) export "$1"; shift ;;
	*) break ;;
	esac
done
exec "$@"
`
	stubSudoPassword = "#!/bin/sh\necho \"sudo $*\" >>\"$STUB_LOG\"\necho 'sudo: a password is required' >&2\nexit 1\n"
)

// TestPrereqs runs scripts/prereqs.sh, the first step of `make demo`, on a machine without
// bubblewrap: its PATH holds a few real tools and stubs only, so the real bwrap, apt-get and
// sudo are never found and nothing is installed. Non-root cases run as nobody.
func TestPrereqs(t *testing.T) {
	tests := []struct {
		name      string
		root      bool
		tools     map[string]string // stub name -> script
		wantCode  int
		wantOut   string   // a line stdout must hold
		wantErr   string   // a line stderr must hold
		wantCalls []string // the stubs' log, in order
	}{
		{
			name:  "nothing missing",
			tools: map[string]string{"bwrap": stubPresent, "git": stubPresent, "apt-get": stubAptGet, "sudo": stubSudo},
		},
		{
			name:     "non-root without sudo prints the command for bubblewrap",
			tools:    map[string]string{"git": stubPresent, "apt-get": stubAptGet},
			wantCode: 2,
			wantErr:  "  sudo apt-get install -y bubblewrap",
		},
		{
			name:     "non-root without sudo prints the command for both",
			tools:    map[string]string{"apt-get": stubAptGet},
			wantCode: 2,
			wantErr:  "  sudo apt-get install -y bubblewrap git",
		},
		{
			name:      "non-root with a sudo that wants a password",
			tools:     map[string]string{"git": stubPresent, "apt-get": stubAptGet, "sudo": stubSudoPassword},
			wantCode:  2,
			wantErr:   "  sudo apt-get install -y bubblewrap",
			wantCalls: []string{"sudo -n true"},
		},
		{
			name:    "non-root with passwordless sudo installs",
			tools:   map[string]string{"apt-get": stubAptGet, "sudo": stubSudo},
			wantOut: "== installing bubblewrap git (sudo apt-get)",
			wantCalls: []string{
				"sudo -n true",
				"sudo -n apt-get update -qq",
				"apt-get update -qq (DEBIAN_FRONTEND=)",
				"sudo -n DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap git",
				"apt-get install -y -qq bubblewrap git (DEBIAN_FRONTEND=noninteractive)",
			},
		},
		{
			name:    "root installs with apt-get, no sudo",
			root:    true,
			tools:   map[string]string{"git": stubPresent, "apt-get": stubAptGet, "sudo": stubSudo},
			wantOut: "== installing bubblewrap (apt-get, as root)",
			wantCalls: []string{
				"apt-get update -qq (DEBIAN_FRONTEND=)",
				"apt-get install -y -qq bubblewrap (DEBIAN_FRONTEND=noninteractive)",
			},
		},
		{
			name:     "root without apt-get prints the command",
			root:     true,
			tools:    map[string]string{"git": stubPresent},
			wantCode: 2,
			wantErr:  "  sudo apt-get install -y bubblewrap",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("SKIP: this case runs the script as root, and the test is not root")
			}
			r := run(t, tt.root, tt.tools, "prereqs.sh")
			if r.code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			checkLine(t, "stdout", r.stdout, tt.wantOut)
			checkLine(t, "stderr", r.stderr, tt.wantErr)
			if d := cmp.Diff(tt.wantCalls, r.calls); d != "" {
				t.Errorf("calls to the stubs (-want +got):\n%s", d)
			}
		})
	}
}

// TestDemoStopsWithoutPrereqs runs scripts/demo.sh itself the way a newcomer without root
// would: it stops before creating anything, with exit 2 and the command to run.
func TestDemoStopsWithoutPrereqs(t *testing.T) {
	r := run(t, false, map[string]string{"git": stubPresent, "apt-get": stubAptGet}, "demo.sh", "prereqs.sh")
	if r.code != 2 {
		t.Errorf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkLine(t, "stderr", r.stderr, "  sudo apt-get install -y bubblewrap")
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing: the demo went on", r.stdout)
	}
}

type result struct {
	code           int
	stdout, stderr string
	calls          []string // the stubs' log
}

// run copies scripts into a fresh directory's scripts/ and runs the first with bash, a PATH
// holding only id, dirname, bash and the tools (name -> stub), and as nobody unless root is set
// (when the test itself is not root, it runs as the test's user).
func run(t *testing.T, root bool, tools map[string]string, scripts ...string) result {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash runs the scripts: %v", err)
	}
	dir := sharedTempDir(t)
	bin := filepath.Join(dir, "bin")
	mkdir(t, bin, 0o755)
	// id says who runs the script; demo.sh finds its directory with dirname and runs
	// prereqs.sh through its #!/usr/bin/env bash.
	for _, name := range []string{"id", "dirname", "bash"} {
		real, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("the scripts need %s: %v", name, err)
		}
		if err := os.Symlink(real, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	// sudo's stub runs `true` after its options.
	write(t, filepath.Join(bin, "true"), stubPresent, 0o755)
	for name, text := range tools {
		write(t, filepath.Join(bin, name), text, 0o755)
	}
	logs := filepath.Join(dir, "log")
	mkdir(t, logs, 0o777)
	mkdir(t, filepath.Join(dir, "scripts"), 0o755)
	for _, name := range scripts {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "scripts", name), string(text), 0o755)
	}

	cmd := exec.Command(bash, filepath.Join(dir, "scripts", scripts[0]))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bin, "HOME=" + dir, "LC_ALL=C", "STUB_LOG=" + filepath.Join(logs, "calls")}
	if !root && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var r result
	if err := cmd.Run(); err != nil {
		ee := (*exec.ExitError)(nil)
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		r.code = ee.ExitCode()
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	calls, err := os.ReadFile(filepath.Join(logs, "calls"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	r.calls = lines(string(calls))
	return r
}

// sharedTempDir is a temporary directory the nobody user can enter: t.TempDir's parents are
// private to the test's user.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agora-prereqs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	// Mkdir's mode passes through the umask.
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// checkLine fails unless text holds the line want, or is empty when want is "".
func checkLine(t *testing.T, name, text, want string) {
	t.Helper()
	switch {
	case want == "" && text != "":
		t.Errorf("%s = %q, want nothing", name, text)
	case want != "" && !strings.Contains("\n"+text, "\n"+want+"\n"):
		t.Errorf("%s has no line %q:\n%s", name, want, text)
	}
}

func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		out = append(out, strings.TrimSuffix(l, "\n"))
	}
	return out
}
