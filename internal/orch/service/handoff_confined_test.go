package service_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// The hand-off never widens what its caller may do: a CLI confined in a way serve or
// the resident dispatcher is not (every capability dropped, no_new_privs, a Landlock domain)
// is declined, says why on its stderr, and runs its dispatch itself with what it may do. The
// repository holds a secret the confined CLI may not read (mode 000 for the one without
// capabilities, outside the Landlock domain); handed off, the taker read it for the CLI and
// the secret came back in the dispatch's output.

// secretRepo is a git repository whose one file holds a secret of its own; it returns its
// path and the secret.
func secretRepo(t *testing.T) (repo, secret string) {
	t.Helper()
	secret = "s3cret-" + strings.ReplaceAll(filepath.Base(t.TempDir()), "0", "o") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	repo = filepath.Join(t.TempDir(), "repo")
	must(t, os.Mkdir(repo, 0o755))
	must(t, os.WriteFile(filepath.Join(repo, "secret.txt"), []byte(secret+"\n"), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return repo, secret
}

// leaked reports whether secret is in out or in any file under the home (the dispatch's
// logs, its patch, its stage): what a handed-off dispatch read comes back through them.
func leaked(t *testing.T, e *env, secret, out string) bool {
	t.Helper()
	if strings.Contains(out, secret) {
		return true
	}
	found := false
	filepath.WalkDir(e.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Logf("the secret is in %s", path)
			found = true
		}
		return nil
	})
	return found
}

// confinement is a way to run the CLI confined: cmd makes the command for agora ARGS, shut
// closes the repository to it (nil: the CLI may read it, and its own dispatch does), why is
// what the decline names.
type confinement struct {
	name string
	cmd  func(e *env, args ...string) *exec.Cmd
	shut func(t *testing.T, repo string)
	why  string
}

func confinements(t *testing.T) []confinement {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("SKIP: needs root: the confined CLI is root less what confines it, the taker root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is missing: %v", err)
	}
	setpriv := func(opts ...string) func(e *env, args ...string) *exec.Cmd {
		return func(e *env, args ...string) *exec.Cmd {
			c := exec.Command("setpriv", append(append(opts, "--", agoraBin), args...)...)
			c.Env = e.vars
			return c
		}
	}
	cs := []confinement{
		{"no capabilities", setpriv("--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"),
			func(t *testing.T, repo string) { must(t, os.Chmod(repo, 0)) }, "capabilities"},
		{"no_new_privs", setpriv("--no-new-privs"), nil, "no_new_privs"},
	}
	if why := agoratest.LandlockAvailable(); why != "" {
		t.Logf("SKIP: the Landlock caller: %s", why)
		return cs
	}
	return append(cs, confinement{"landlock", func(e *env, args ...string) *exec.Cmd {
		// What the CLI reads (the system, the agora binaries, the home), not the repository.
		dirs := []string{"/usr", "/etc", "/proc", "/sys", "/dev", "/run", "/var", "/root", filepath.Dir(agoraBin), e.home}
		for _, d := range []string{"/lib", "/lib64", "/bin", "/sbin"} {
			if _, err := os.Stat(d); err == nil {
				dirs = append(dirs, d)
			}
		}
		return agoratest.LandlockCommand(dirs, e.vars, agoraBin, args...)
	}, func(*testing.T, string) {}, "proof"}) // the domain leaves the repository out: nothing to shut
}

// runConfined runs `agora dispatch run --subagent reader --repo REPO` confined by c.
func runConfined(t *testing.T, e *env, c confinement, repo string) (code int, out, errOut string) {
	t.Helper()
	cmd := c.cmd(e, "dispatch", "run", "--subagent", "reader", "--repo", repo)
	var o, eo strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &eo
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: exit %d\nstdout: %s\nstderr: %s", c.name, code, o.String(), eo.String())
	return code, o.String(), eo.String()
}

const readerYAML = "runtime: exec\ncommand: [sh, -c, 'cat secret.txt; cp secret.txt leaked.txt']\ncapabilities: [shell]\n"

// TestHandoff_ConfinedCallers: against serve.
func TestHandoff_ConfinedCallers(t *testing.T) {
	cs := confinements(t)
	e, _ := handoffEnv(t)
	e.applySubagents(map[string]string{"reader": readerYAML})
	// The oracle sees a secret that comes back: the same dispatch from an unconfined CLI.
	repo, secret := secretRepo(t)
	if code, out, stderr := e.oneShot(nil, "--subagent", "reader", "--repo", repo); code != 0 || !leaked(t, e, secret, out+stderr) || e.handoffs() != 1 {
		t.Fatalf("unconfined: exit %d, hand-offs %d, the secret back %v\n%s%s", code, e.handoffs(), leaked(t, e, secret, out+stderr), out, stderr)
	}
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			repo, secret := secretRepo(t)
			if c.shut != nil {
				c.shut(t, repo)
			}
			before := e.handoffs()
			_, out, stderr := runConfined(t, e, c, repo)
			if e.handoffs() != before {
				t.Errorf("serve took the dispatch of a CLI with %s", c.name)
			}
			if c.shut != nil && leaked(t, e, secret, out+stderr) {
				t.Errorf("the secret came back to a CLI with %s:\n%s%s", c.name, out, stderr)
			}
			if !strings.Contains(stderr, "the orchestrator (agora orch serve) declined this dispatch") || !strings.Contains(stderr, c.why) {
				t.Errorf("the CLI with %s did not say serve declined, naming %q:\n%s", c.name, c.why, stderr)
			}
		})
	}
}

// TestResident_ConfinedCallers: against the resident dispatcher.
func TestResident_ConfinedCallers(t *testing.T) {
	cs := confinements(t)
	e := residentEnv(t, "")
	e.applySubagents(map[string]string{"reader": readerYAML})
	e.firstResident()
	repo, secret := secretRepo(t)
	if code, out, stderr := e.oneShot(nil, "--subagent", "reader", "--repo", repo); code != 0 || !leaked(t, e, secret, out+stderr) {
		t.Fatalf("unconfined: exit %d, the secret back %v\n%s%s", code, leaked(t, e, secret, out+stderr), out, stderr)
	}
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			repo, secret := secretRepo(t)
			if c.shut != nil {
				c.shut(t, repo)
			}
			_, out, stderr := runConfined(t, e, c, repo)
			if c.shut != nil && leaked(t, e, secret, out+stderr) {
				t.Errorf("the secret came back to a CLI with %s:\n%s%s", c.name, out, stderr)
			}
			if !strings.Contains(stderr, "the resident dispatcher (agora dispatch resident) declined this dispatch") || !strings.Contains(stderr, c.why) {
				t.Errorf("the CLI with %s did not say the resident declined, naming %q:\n%s", c.name, c.why, stderr)
			}
		})
	}
	if n := e.stopResident(); n != 1 {
		t.Errorf("the resident took %d dispatches, want only the unconfined CLI's", n)
	}
}
