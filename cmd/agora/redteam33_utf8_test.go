package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedTeam33_NotUTF8CommandLine: a command line whose values are not UTF-8 (a Latin-1
// directory name, a byte pasted into a name) is never handed to serve, by the front or by
// agora-full: the request's JSON would carry U+FFFD in their place, so serve would judge
// another subagent, target or path than the one typed (a directory named with U+FFFD beside
// a Latin-1 one would be dispatched on). The command ends as agora-full in the CLI ends it.
// Failed before: both asked serve (once each) for every case.
func TestRedTeam33_NotUTF8CommandLine(t *testing.T) {
	fs := newFakeServe(t, declines)
	if err := os.Chmod(fs.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := full(t, fs.env(), "init"); got.code != 0 {
		t.Fatalf("agora init: %+v", got)
	}
	latin1 := filepath.Join(t.TempDir(), "r\xe9po")
	if err := os.Mkdir(latin1, 0o755); err != nil {
		t.Fatal(err)
	}
	// The name serve would read for it, made by someone else.
	if err := os.Mkdir(filepath.Join(filepath.Dir(latin1), "r\ufffdpo"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--subagent", "x\xff"},
		{"--subagent", "x", "--target", "t\xe9"},
		{"--subagent", "x", "--env", "a,b\xff"},
		{"--subagent", "x", "--repo", latin1},
		{"--subagent", "x", "--repo", "/nonexistent@v\xff"},
		{"--subagent", "x", "--workspace", "w\xff"},
		{"--subagent", "x", "--callback", "https://h/\xff"},
	} {
		t.Run(strings.ToValidUTF8(strings.Join(args, " "), "?"), func(t *testing.T) {
			all := append([]string{"dispatch", "run"}, args...)
			before := fs.count.Load()
			got := front(t, fs.env(), all...)
			if n := fs.count.Load() - before; n != 0 {
				t.Errorf("the front asked serve %d times", n)
			}
			c := exec.Command(filepath.Join(filepath.Dir(agoraBin), fullName), all...)
			c.Args[0] = "agora"
			c.Env = fs.env()
			want := run(t, c)
			if n := fs.count.Load() - before; n != 0 {
				t.Errorf("agora-full asked serve %d times", n)
			}
			if got != want {
				t.Errorf("the front ended %+v\nagora-full ended %+v", got, want)
			}
		})
	}
}

// TestRedTeam33_NotUTF8RepoKeepsTheHome: `agora dispatch run --repo .` from a directory whose
// path is not UTF-8 is refused at accept (a usage error naming the path), and the home stays
// usable. Failed before: the dispatch was accepted and run, its end could not be recorded
// ("manifest: canonical json: string is not valid UTF-8", exit 1), and from then on every
// `agora dispatch run` and `agora dispatch list` of the home failed with that error (each
// reap tried to end it again).
func TestRedTeam33_NotUTF8RepoKeepsTheHome(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIP: bubblewrap (bwrap) is not installed; the test runs a real sandboxed worker")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git is not installed")
	}
	home := filepath.Join(t.TempDir(), "home")
	env := append((&fakeServe{home: home}).env(), envNoHandoff+"=1")
	if got := front(t, env, "init"); got.code != 0 {
		t.Fatalf("agora init: %+v", got)
	}
	cat := t.TempDir()
	for name, body := range map[string]string{
		"shell/capability.yaml": "description: a shell\ncommands: [\"sh -c *\"]\n",
		"worker.yaml":           "description: lists its workspace\nruntime: exec\ncommand: [sh, -c, 'ls']\ncapabilities: [shell]\n",
		"agora-manifest.yaml":   "version: 1\ncapabilities:\n  - {name: shell, from: shell}\nsubagents:\n  - {name: worker, from: worker.yaml}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(cat, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cat, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := front(t, env, "apply", "-f", filepath.Join(cat, "agora-manifest.yaml")); got.code != 0 {
		t.Fatalf("agora apply: %+v", got)
	}
	repo := filepath.Join(t.TempDir(), "r\xe9po")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, g := range [][]string{{"init", "-q"}, {"add", "a.txt"}, {"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "a"}} {
		c := exec.Command("git", g...)
		c.Dir = repo
		c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + repo, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", g, err, out)
		}
	}
	c := exec.Command(agoraBin, "dispatch", "run", "--subagent", "worker", "--repo", ".")
	c.Dir, c.Env = repo, env
	got := run(t, c)
	if got.code != exitUsage || !strings.Contains(got.err, "not valid UTF-8") {
		t.Errorf("--repo . under a path that is not UTF-8: %+v, want a usage error (2) naming it", got)
	}
	if got := front(t, env, "dispatch", "list", "-o", "json"); got.code != 0 {
		t.Errorf("agora dispatch list afterwards: %+v", got)
	}
	if got := front(t, env, "dispatch", "run", "--subagent", "worker"); got.code != 0 {
		t.Errorf("the next dispatch of the home: %+v", got)
	}
}
