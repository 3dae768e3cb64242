package dispatch_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// cacheDir is a directory the sandbox user can read, holding seen.txt.
func cacheDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "seen.txt"), []byte("warm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestVerifyCache_ReadOnly: the gate's command finds the target's verify_cache at
// XDG_CACHE_HOME and reads it, and whatever it tries (a new file, a removal, a rename, a
// chmod, writing over a file) leaves the host's directory as it was: one gate's patch cannot
// poison what the next gate's toolchain trusts.
func TestVerifyCache_ReadOnly(t *testing.T) {
	e := newEnv(t)
	cache := cacheDir(t)
	e.setTarget(func(tg *config.Target) { tg.VerifyCache = cache })
	e.subagent("noop", "true")
	cmd := []string{"sh", "-c", `echo "cache=$XDG_CACHE_HOME"; cat "$XDG_CACHE_HOME/seen.txt"
touch "$XDG_CACHE_HOME/planted" && echo PLANTED
rm -f "$XDG_CACHE_HOME/seen.txt" && echo REMOVED
mv "$XDG_CACHE_HOME/seen.txt" "$XDG_CACHE_HOME/moved" && echo MOVED
chmod 777 "$XDG_CACHE_HOME" && echo CHMODDED
echo poisoned > "$XDG_CACHE_HOME/seen.txt" && echo OVERWROTE
mkdir -p "$XDG_CACHE_HOME/go-build/00" && echo MKDIR
exit 0`}
	r := e.run(dispatch.Request{Subagent: "noop", Repo: calcRepo(t), Verify: &verdict.Spec{Command: cmd}})
	v := r.Verdict
	if r.State != lifecycle.DispatchFinished || v == nil || !v.Passed {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want finished and green", r.State, r.Reason, r.Detail, v)
	}
	// The verdict, and its audit entry, say the gate ran with the operator's cache.
	if v.Cache != cache {
		t.Errorf("verdict cache %q, want %q", v.Cache, cache)
	}
	if got := e.audited(r, "dispatch.verified"); len(got) != 1 || got[0].Details["cache"] != cache {
		t.Errorf("dispatch.verified entries %+v: want one naming the cache %s", got, cache)
	}
	// stdout and stderr reach the tail through two pipes: the refusals on stderr may come
	// between the two lines of stdout.
	if !strings.Contains(v.OutputTail, "cache=/agora/cache\n") || !slices.Contains(strings.Split(v.OutputTail, "\n"), "warm") {
		t.Errorf("the command did not find the cache at XDG_CACHE_HOME:\n%s", v.OutputTail)
	}
	for _, done := range []string{"PLANTED", "REMOVED", "MOVED", "CHMODDED", "OVERWROTE", "MKDIR"} {
		if strings.Contains(v.OutputTail, done) {
			t.Errorf("the verify sandbox changed its cache (%s):\n%s", done, v.OutputTail)
		}
	}
	names, err := os.ReadDir(cache)
	if err != nil || len(names) != 1 || names[0].Name() != "seen.txt" {
		t.Errorf("the cache holds %v (%v), want only seen.txt", names, err)
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "seen.txt")); string(b) != "warm\n" {
		t.Errorf("seen.txt holds %q, want it unchanged", b)
	}
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the cache's mode %v (%v), want 0755 unchanged", fi.Mode(), err)
	}
}

// TestVerifyCache_RefusedWhenItWouldShowTheHome: a verify_cache that is agora's home, a
// directory inside it (its keys, its blobs) or one above it, named directly or through a
// symlink, or that is not a directory, ends the dispatch provider-failed, saying why, and
// the command (which would print the home's files) never runs.
func TestVerifyCache_RefusedWhenItWouldShowTheHome(t *testing.T) {
	e := newEnv(t)
	home := e.home.Dir
	good := cacheDir(t)
	links := t.TempDir()
	toHome := filepath.Join(links, "to-home")
	toGood := filepath.Join(links, "to-good")
	if err := os.Symlink(home, toHome); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(good), toGood); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.subagent("noop", "true")
	repo := calcRepo(t)
	for _, c := range []struct{ name, dir, want string }{
		{"the home", home, "is agora's home"},
		{"its keys", filepath.Join(home, "keys"), "is agora's home"},
		{"above it", filepath.Dir(home), "is agora's home"},
		{"the root's child above it", "/" + strings.Split(home, "/")[1], "is agora's home"},
		{"a link to the home", toHome, "symlink on its path"},
		{"a linked parent", filepath.Join(toGood, "cache"), "symlink on its path"},
		{"a file", file, "is not a directory"},
		{"missing", filepath.Join(good, "none"), "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.setTarget(func(tg *config.Target) { tg.VerifyCache = c.dir })
			r := e.run(dispatch.Request{Subagent: "noop", Repo: repo, Verify: &verdict.Spec{Command: []string{"sh", "-c", "ls -R /agora/cache; exit 0"}}})
			if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonProviderFailed || r.Verdict != nil {
				t.Fatalf("dispatch %s %s (%s), verdict %+v: want provider-failed and no verdict", r.State, r.Reason, r.Detail, r.Verdict)
			}
			if !strings.Contains(r.Detail, "verify_cache") || !strings.Contains(r.Detail, c.want) {
				t.Errorf("detail %q, want it to name verify_cache and %q", r.Detail, c.want)
			}
		})
	}
}
