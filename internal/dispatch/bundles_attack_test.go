package dispatch_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// When sandboxes run as the invoking user, a dispatch's pinned catalog content is staged once
// per content digest in dispatches/.bundles/<key> and bound read-only into every later sandbox
// with the same subagent version. These tests try to poison that shared entry: from inside a
// sandbox, and by planting something at its path (or at .bundles) before a dispatch reuses it.
// Each fails if a later dispatch could be handed anything but the catalog's bytes. Run as
// root, they stage as an unprivileged agora does (dispatch.StageAsInvokingUser); the agent
// is then root's uid without capabilities, a stronger attacker than the invoking user's.

// newSharedEnv is newEnv with sandboxes run as the invoking user, who shares bundles.
func newSharedEnv(t *testing.T) *env {
	e := newEnv(t)
	dispatch.StageAsInvokingUser(e.d)
	return e
}

// bundleEntries lists the entries of .bundles.
func (e *env) bundleEntries() []string {
	e.t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.home.Dir, home.DispatchDir, ".bundles"))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ent := range ents {
		out = append(out, filepath.Join(e.home.Dir, home.DispatchDir, ".bundles", ent.Name()))
	}
	return out
}

// onlyBundleEntry returns the one entry of .bundles, after r ran.
func (e *env) onlyBundleEntry(r *dispatch.Record) string {
	e.t.Helper()
	if r.State != lifecycle.DispatchFinished {
		e.t.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
	}
	entries := e.bundleEntries()
	if len(entries) != 1 {
		e.t.Fatalf("after one subagent version ran, .bundles holds %v; want one entry", entries)
	}
	return entries[0]
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkEntryIntact fails t unless entry is a real directory holding exactly the catalog's
// bytes for r: subagent.json of r's subagent digest, one capability archive whose name is its
// own digest, an empty manifest.json placeholder, nothing else, and nothing open to others.
func checkEntryIntact(t *testing.T, entry string, r *dispatch.Record) {
	t.Helper()
	fi, err := os.Lstat(entry)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("entry %s is %v, want a directory of mode 0700", entry, fi.Mode())
	}
	var names []string
	err = filepath.WalkDir(entry, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(entry, p)
		names = append(names, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 || info.Mode().Perm()&0o077 != 0 {
			t.Errorf("entry file %s has mode %v", rel, info.Mode())
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case rel == "subagent.json":
			if got, want := "sha256:"+sha256Hex(b), string(r.SubagentDigest); got != want {
				t.Errorf("the shared subagent.json is %s, want the catalog's %s", got, want)
			}
		case rel == "manifest.json":
			if len(b) != 0 {
				t.Errorf("the shared manifest.json placeholder holds %q, want nothing", b)
			}
		case strings.HasPrefix(rel, "capabilities/"):
			if got := "capabilities/" + sha256Hex(b) + ".tar"; got != rel {
				t.Errorf("the shared capability %s holds the bytes of %s", rel, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if len(names) != 5 || names[0] != "." || names[1] != "capabilities" || !strings.HasPrefix(names[2], "capabilities/") ||
		names[3] != "manifest.json" || names[4] != "subagent.json" {
		t.Errorf("the shared entry holds %q; want ., capabilities, one archive, manifest.json, subagent.json", names)
	}
}

// TestRedTeam_SharedBundleWritesFromSandbox
//
// Attack: an agent writes, chmods, removes, renames and adds files in /agora/bundle, hoping
// the next dispatch of the same subagent version is given what it left there.
//
// Impact if it worked: a later sandbox (any sandbox uid of a root agora) would run a subagent
// document or capability the catalog never held.
func TestRedTeam_SharedBundleWritesFromSandbox(t *testing.T) {
	e := newSharedEnv(t)
	e.subagent("poison", `b=/agora/bundle
[ -s $b/subagent.json ] && echo seen-subagent
grep -q '"dispatch_id"' $b/manifest.json && echo seen-manifest
for f in $b/subagent.json $b/manifest.json $b/capabilities/*.tar; do
  (printf x >> "$f") 2>/dev/null && echo "wrote $f"
  chmod 666 "$f" 2>/dev/null && echo "chmod $f"
  rm -f "$f" 2>/dev/null; [ -e "$f" ] || echo "removed $f"
  mv "$f" /tmp/moved 2>/dev/null && echo "moved $f"
done
touch $b/evil 2>/dev/null && echo created-file
mkdir $b/capabilities/dir 2>/dev/null && echo created-dir
ln -s /etc/passwd $b/link 2>/dev/null && echo created-link
chmod 777 $b $b/capabilities 2>/dev/null && echo chmod-dir
umount $b/manifest.json 2>/dev/null && echo unmounted
true`)
	first := e.run(dispatch.Request{Subagent: "poison"})
	entry := e.onlyBundleEntry(first)
	out := e.stdout(first)
	if !strings.Contains(out, "seen-subagent") || !strings.Contains(out, "seen-manifest") {
		t.Fatalf("the agent did not see its bundle at /agora/bundle (a vacuous run):\n%s", out)
	}
	for line := range strings.Lines(out) {
		if line = strings.TrimSpace(line); line != "seen-subagent" && line != "seen-manifest" {
			t.Errorf("the agent changed the shared bundle from its sandbox: %s", line)
		}
	}
	checkEntryIntact(t, entry, first)
	// The next dispatch reuses the entry as it is.
	second := e.run(dispatch.Request{Subagent: "poison"})
	if got := e.onlyBundleEntry(second); got != entry {
		t.Errorf("the second dispatch used %s, want the shared %s", got, entry)
	}
	checkEntryIntact(t, entry, second)
}

// TestRedTeam_SharedBundlePlanted
//
// Attack: something is planted where a dispatch looks for its shared bundle before the
// dispatch runs: a symlink to a directory someone else can write, a half-written or altered
// entry (as a crash or an edit would leave), a file linked in from elsewhere, an entry others
// may write, or a symlink in place of .bundles itself.
//
// Impact if it worked: the sandbox would be handed content that is not the catalog's, or
// content someone can swap between the host's check and the mount.
func TestRedTeam_SharedBundlePlanted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, entry, elsewhere string)
	}{
		{"entry is a symlink to a writable copy", func(t *testing.T, entry, elsewhere string) {
			copyTree(t, entry, elsewhere)
			os.Chmod(elsewhere, 0o777)
			os.RemoveAll(entry)
			mustDo(t, os.Symlink(elsewhere, entry))
		}},
		{"subagent.json altered", func(t *testing.T, entry, _ string) {
			mustDo(t, os.WriteFile(filepath.Join(entry, "subagent.json"), []byte(`{"runtime":"exec","command":["sh","-c","echo pwned"]}`), 0o644))
		}},
		{"subagent.json cut short", func(t *testing.T, entry, _ string) {
			mustDo(t, os.Truncate(filepath.Join(entry, "subagent.json"), 10))
		}},
		{"capability archive missing", func(t *testing.T, entry, _ string) {
			ents, _ := os.ReadDir(filepath.Join(entry, "capabilities"))
			for _, ent := range ents {
				os.Remove(filepath.Join(entry, "capabilities", ent.Name()))
			}
		}},
		{"subagent.json is a symlink to an identical file", func(t *testing.T, entry, elsewhere string) {
			p := filepath.Join(entry, "subagent.json")
			b, err := os.ReadFile(p)
			mustDo(t, err)
			mustDo(t, os.WriteFile(elsewhere, b, 0o666))
			os.Remove(p)
			mustDo(t, os.Symlink(elsewhere, p))
		}},
		{"subagent.json is a hard link", func(t *testing.T, entry, elsewhere string) {
			mustDo(t, os.Link(filepath.Join(entry, "subagent.json"), elsewhere))
		}},
		{"entry writable by others", func(t *testing.T, entry, _ string) {
			mustDo(t, os.Chmod(entry, 0o777))
		}},
		{"entry readable by others", func(t *testing.T, entry, _ string) {
			mustDo(t, os.Chmod(entry, 0o755))
		}},
		{"capabilities writable by others", func(t *testing.T, entry, _ string) {
			mustDo(t, os.Chmod(filepath.Join(entry, "capabilities"), 0o777))
		}},
		{"entry owned by another user", func(t *testing.T, entry, _ string) {
			if os.Geteuid() != 0 {
				t.Skip("SKIP: only root can give the entry to another user")
			}
			mustDo(t, os.Lchown(entry, 65534, 65534))
		}},
		{"manifest placeholder filled in", func(t *testing.T, entry, _ string) {
			mustDo(t, os.WriteFile(filepath.Join(entry, "manifest.json"), []byte(`{"version":1}`), 0o644))
		}},
		{"entry is a file", func(t *testing.T, entry, _ string) {
			os.RemoveAll(entry)
			mustDo(t, os.WriteFile(entry, []byte("not a bundle"), 0o644))
		}},
		{".bundles is a symlink to a writable copy", func(t *testing.T, entry, elsewhere string) {
			bundles := filepath.Dir(entry)
			copyTree(t, bundles, elsewhere)
			os.Chmod(elsewhere, 0o777)
			os.RemoveAll(bundles)
			mustDo(t, os.Symlink(elsewhere, bundles))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSharedEnv(t)
			e.subagent("victim", `cat /agora/bundle/subagent.json; echo`)
			first := e.run(dispatch.Request{Subagent: "victim"})
			entry := e.onlyBundleEntry(first)
			elsewhere := filepath.Join(t.TempDir(), "planted")
			tc.plant(t, entry, elsewhere)
			var before []string
			filepath.WalkDir(filepath.Dir(elsewhere), func(p string, _ os.DirEntry, _ error) error {
				before = append(before, p)
				return nil
			})

			second := e.run(dispatch.Request{Subagent: "victim"})
			if second.State != lifecycle.DispatchFinished {
				t.Fatalf("after the plant the dispatch ended %s %s: %s (the plant was used, not replaced)", second.State, second.Reason, second.Detail)
			}
			if out := e.stdout(second); strings.Contains(out, "pwned") {
				t.Errorf("the sandbox was handed the planted subagent document:\n%s", out)
			}
			bundles := filepath.Dir(entry)
			if fi, err := os.Lstat(bundles); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Fatalf(".bundles after the plant: %v, %v; want a directory of mode 0700", fi, err)
			}
			if got := e.onlyBundleEntry(second); got != entry {
				t.Errorf("the second dispatch used %s, want %s", got, entry)
			}
			checkEntryIntact(t, entry, second)
			var after []string
			filepath.WalkDir(filepath.Dir(elsewhere), func(p string, _ os.DirEntry, _ error) error {
				after = append(after, p)
				return nil
			})
			if !slices.Equal(before, after) {
				t.Errorf("staging wrote where the plant pointed: %q before, %q after", before, after)
			}
			// What was moved out of the way went with the dispatch's stage.
			stage := filepath.Join(e.home.Dir, home.DispatchDir, second.ID)
			ents, _ := os.ReadDir(stage)
			for _, ent := range ents {
				if !strings.HasSuffix(ent.Name(), ".log") {
					t.Errorf("after the dispatch its stage still holds %s", ent.Name())
				}
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the directory src (regular files and directories) to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Dispatches of one subagent version that stage its shared bundle at the same time all run,
// with one entry left: a rename that loses finds the winner's entry and checks it.
func TestDispatch_SharedBundleStagedConcurrently(t *testing.T) {
	e := newSharedEnv(t)
	e.subagent("many", `true`)
	var wg sync.WaitGroup
	records := make([]*dispatch.Record, 4)
	for i := range records {
		wg.Go(func() {
			r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "many", Actor: "test", Timeout: 30 * time.Second})
			if err == nil {
				r, err = e.d.Supervise(t.Context(), r.ID, nil)
			}
			if err != nil {
				t.Error(err)
				return
			}
			records[i] = r
		})
	}
	wg.Wait()
	for _, r := range records {
		if r != nil && r.State != lifecycle.DispatchFinished {
			t.Errorf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
		}
	}
	if entries := e.bundleEntries(); len(entries) != 1 {
		t.Errorf(".bundles holds %v, want one entry", entries)
	} else if records[0] != nil {
		checkEntryIntact(t, entries[0], records[0])
	}
}

// A root agora runs each sandbox as one of its sandbox uids, and nothing in AGORA_HOME may be
// read by a uid that does not own it: it shares no entry, and writes each dispatch's whole
// bundle into the stage, handed to that dispatch's uid.
func TestDispatch_RootStagesEachBundle(t *testing.T) {
	requireRootLimits(t)
	e := newEnv(t)
	e.subagent("solo", `[ -s /agora/bundle/subagent.json ] && echo seen`)
	r := e.run(dispatch.Request{Subagent: "solo"})
	if r.State != lifecycle.DispatchFinished || !strings.Contains(e.stdout(r), "seen") {
		t.Fatalf("dispatch %s: %s %s: %s", r.ID, r.State, r.Reason, r.Detail)
	}
	if ents, err := os.ReadDir(filepath.Join(e.home.Dir, home.DispatchDir, ".bundles")); err == nil && len(ents) > 0 {
		t.Errorf("a root agora shared a bundle: .bundles holds %d entries", len(ents))
	}
}
