package dispatch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCleanupIsGatewayFallback(t *testing.T) {
	tmp := filepath.Clean(os.TempDir())
	tests := []struct {
		name, path string
		want       bool
	}{
		{name: "MkdirTemp", path: filepath.Join(tmp, "agora-gw-123456"), want: true},
		{name: "PrefixOnly", path: filepath.Join(tmp, "agora-gw-")},
		{name: "OtherName", path: filepath.Join(tmp, "agora-123456")},
		{name: "Relative", path: "agora-gw-123456"},
		{name: "Nested", path: filepath.Join(tmp, "x", "agora-gw-123456")},
		{name: "DotDot", path: tmp + "/agora-gw-1/../victim"},
		{name: "TrailingSlash", path: filepath.Join(tmp, "agora-gw-123456") + "/"},
		{name: "Root", path: "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isGatewayFallback(tt.path); got != tt.want {
				t.Errorf("isGatewayFallback(%q) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}

// TestCleanupGatewayEntry removes a stage's gateway entry the way removeWork does: a link to
// a gateway's temporary directory takes that directory with it; a link anywhere else, or
// to a link, takes only itself.
func TestCleanupGatewayEntry(t *testing.T) {
	mkTemp := func(t *testing.T) string {
		t.Helper()
		d, err := os.MkdirTemp("", gatewayFallbackPrefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.WriteFile(filepath.Join(d, "s"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	victim := func(t *testing.T) string {
		t.Helper()
		d := filepath.Join(t.TempDir(), "victim")
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "keep"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name string
		// setup returns the link's target and the directories that must be gone or kept.
		setup      func(t *testing.T) (target string, gone, kept []string)
		plainEntry bool
	}{
		{name: "FallbackDir", setup: func(t *testing.T) (string, []string, []string) {
			d := mkTemp(t)
			return d, []string{d}, nil
		}},
		{name: "ElsewhereDir", setup: func(t *testing.T) (string, []string, []string) {
			v := victim(t)
			return v, nil, []string{v}
		}},
		{name: "FallbackNameIsLink", setup: func(t *testing.T) (string, []string, []string) {
			v := victim(t)
			l := filepath.Join(os.TempDir(), gatewayFallbackPrefix+"link"+filepath.Base(filepath.Dir(filepath.Dir(v))))
			if err := os.Symlink(v, l); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(l) })
			return l, nil, []string{v, l}
		}},
		{name: "NotCleanPath", setup: func(t *testing.T) (string, []string, []string) {
			d, v := mkTemp(t), victim(t)
			rel, err := filepath.Rel(d, v)
			if err != nil {
				t.Fatal(err)
			}
			return d + "/" + rel, nil, []string{v, d}
		}},
		{name: "PlainDirectory", plainEntry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entry := filepath.Join(t.TempDir(), "gateway")
			var gone, kept []string
			if tt.plainEntry {
				if err := os.MkdirAll(filepath.Join(entry, "sub"), 0o700); err != nil {
					t.Fatal(err)
				}
			} else {
				var target string
				target, gone, kept = tt.setup(t)
				if err := os.Symlink(target, entry); err != nil {
					t.Fatal(err)
				}
			}
			removeGatewayEntry(entry)
			for _, p := range append(gone, entry) {
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Errorf("%s is still there: %v", p, err)
				}
			}
			for _, p := range kept {
				if _, err := os.Lstat(p); err != nil {
					t.Errorf("%s was removed: %v", p, err)
				}
			}
		})
	}
}

// TestCleanupHeldStages follows a stage through the held index: listed from before its
// work is made until removeWork has removed it all; anything else in the index is ignored.
func TestCleanupHeldStages(t *testing.T) {
	stateDir := t.TempDir()
	const id = "01M8198E9H3WJ6JTRTP9H0PHPV"
	s, err := newStage(stateDir, id, stageLimits{sandboxed: true})
	if err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(stateDir, heldDir)
	for _, junk := range []string{"not-an-id", "01m8198e9h3wj6jtrtp9h0phpv"} {
		if err := os.WriteFile(filepath.Join(index, junk), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(index, "01M8198E9H3WJ6JTRTP9H0PHPW"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := heldStages(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{id}, got); diff != "" {
		t.Errorf("held stages while staged (-want +got):\n%s", diff)
	}
	s.removeWork()
	got, err = heldStages(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("held stages after removeWork = %v, want none", got)
	}
	if _, err := os.Stat(s.bundle); !os.IsNotExist(err) {
		t.Errorf("bundle after removeWork: %v", err)
	}
	if none, err := heldStages(t.TempDir()); err != nil || none != nil {
		t.Errorf("heldStages of a state directory without an index = %v, %v; want none", none, err)
	}
}
