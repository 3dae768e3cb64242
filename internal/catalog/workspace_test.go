package catalog

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRevision(t *testing.T) {
	sha1 := strings.Repeat("ab", 20)
	sha256 := strings.Repeat("0f", 32)
	tests := []struct {
		name    string
		in      string
		want    Revision
		wantErr string
	}{
		{"branch", "main", Revision{Name: "main"}, ""},
		{"nested branch", "release/1", Revision{Name: "release/1"}, ""},
		{"tag with dots", "v1.2.0", Revision{Name: "v1.2.0"}, ""},
		{"sha1 commit", sha1, Revision{Commit: sha1}, ""},
		{"sha256 commit", sha256, Revision{Commit: sha256}, ""},
		{"uppercase commit folded", strings.ToUpper(sha1), Revision{Commit: sha1}, ""},
		{"short hex is a name", "abc123", Revision{Name: "abc123"}, ""},
		{"empty", "", Revision{}, "empty"},
		{"tilde", "main~1", Revision{}, "holds '~'"},
		{"caret", "main^", Revision{}, "holds '^'"},
		{"reflog", "main@{1}", Revision{}, "holds '@'"},
		{"colon", "main:README.md", Revision{}, "holds ':'"},
		{"option", "--upload-pack=x", Revision{}, "holds '='"},
		{"leading dash", "-x", Revision{}, "starts with '-'"},
		{"dot dot", "../x", Revision{}, "starts or ends with '.'"},
		{"inner dot dot", "a/../b", Revision{}, `holds ".."`},
		{"HEAD", "HEAD", Revision{}, "not a branch or tag name"},
		{"full ref", "refs/heads/main", Revision{}, "not a branch or tag name"},
		{"space", "a b", Revision{}, "holds ' '"},
		{"wildcard", "release/*", Revision{}, "holds '*'"},
		{"lock", "main.lock", Revision{}, `ends with ".lock"`},
		{"hidden component", "a/.b", Revision{}, "component starting with '.'"},
		{"double slash", "a//b", Revision{}, `holds "//"`},
		{"too long", strings.Repeat("a", MaxRevisionLen+1), Revision{}, "over the limit"},
		{"non-ASCII", "mäin", Revision{}, "holds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRevision(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMatchRevision(t *testing.T) {
	pats := []string{"main", "release/*"}
	for name, want := range map[string]bool{
		"main": true, "release/1": true, "release/1/hotfix": false, "feature/x": false, "mainline": false,
	} {
		if got := MatchRevision(pats, name); got != want {
			t.Errorf("MatchRevision(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestWorkspaceDoc_Check(t *testing.T) {
	ok := WorkspaceDoc{Repo: "/srv/src/app", Revisions: []string{"main", "release/*"}, DefaultRevision: "main"}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		change  func(*WorkspaceDoc)
		wantErr string
	}{
		{"relative repo", func(d *WorkspaceDoc) { d.Repo = "src/app" }, "not absolute and clean"},
		{"unclean repo", func(d *WorkspaceDoc) { d.Repo = "/srv/../etc" }, "not absolute and clean"},
		{"no patterns", func(d *WorkspaceDoc) { d.Revisions = nil }, "no revision patterns"},
		{"bad pattern", func(d *WorkspaceDoc) { d.Revisions = []string{"main~1"} }, `revision pattern "main~1" holds '~'`},
		{"broken class", func(d *WorkspaceDoc) { d.Revisions = []string{"rel[ease"} }, "not a valid pattern"},
		{"twice", func(d *WorkspaceDoc) { d.Revisions = []string{"main", "main"} }, "named twice"},
		{"default outside", func(d *WorkspaceDoc) { d.DefaultRevision = "feature/x" }, `default revision "feature/x" matches none of the revision patterns ["main","release/*"]`},
		{"default syntax", func(d *WorkspaceDoc) { d.DefaultRevision = "main~1" }, "default revision: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ok
			d.Revisions = append([]string{}, ok.Revisions...)
			tt.change(&d)
			if err := d.Check(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWorkspaceDoc_RoundTrip(t *testing.T) {
	d := WorkspaceDoc{Repo: "/srv/src/app", Revisions: []string{"main", "release/*"}, Description: "the app"}
	b, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"description":"the app","repo":"/srv/src/app","revisions":["main","release/*"]}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	got, err := ParseWorkspaceDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if m := d.Meta(); strings.Contains(strings.Join(m.Revisions, ",")+m.Description+m.DefaultRevision, "/srv") {
		t.Errorf("meta carries the repository path: %+v", m)
	}
	for _, bad := range []string{`{"repo":"/a","revisions":["main"],"extra":1}`, `{"repo":"/a","repo":"/b","revisions":["main"]}`, `{"repo":"/a","revisions":[]}`} {
		if _, err := ParseWorkspaceDoc([]byte(bad)); err == nil {
			t.Errorf("ParseWorkspaceDoc(%s) accepted it", bad)
		}
	}
}

// refNameRE is what an accepted ref name may look like; nothing git reads as syntax.
var refNameRE = regexp.MustCompile(`^[A-Za-z0-9_+][A-Za-z0-9._+/-]*$`)

func FuzzParseRevision(f *testing.F) {
	for _, s := range []string{"main", "release/1", "v1.0", strings.Repeat("a", 40), "main~1", "HEAD", "--upload-pack=x",
		"../x", "a@{1}", "a:b", "refs/heads/x", "x.lock", "a/.b", "\x00", "a\\b", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRevision(s)
		if err != nil {
			return
		}
		if r.IsCommit() {
			if (len(r.Commit) != 40 && len(r.Commit) != 64) || !isHex(r.Commit) || strings.ToLower(r.Commit) != r.Commit {
				t.Fatalf("accepted commit %q", r.Commit)
			}
			return
		}
		if r.Name != s || !refNameRE.MatchString(s) || strings.Contains(s, "..") || strings.Contains(s, "//") ||
			strings.HasSuffix(s, "/") || strings.HasSuffix(s, ".") || strings.Contains(s, "/.") || s == "HEAD" ||
			strings.HasPrefix(s, "refs/") || len(s) > MaxRevisionLen {
			t.Fatalf("accepted ref name %q", s)
		}
		// A pattern check accepts every name, and the name matches itself.
		if err := CheckRevisionPattern(s); err != nil || !MatchRevision([]string{s}, s) {
			t.Fatalf("name %q: as a pattern %v", s, err)
		}
	})
}

func FuzzParseWorkspaceDoc(f *testing.F) {
	for _, s := range []string{`{"repo":"/a","revisions":["main"]}`, `{"repo":"/a","revisions":["main","r/*"],"default_revision":"main","description":"d"}`,
		`{"repo":"a","revisions":["main"]}`, `{"repo":"/a","revisions":["m["]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseWorkspaceDoc(b)
		if err != nil {
			return
		}
		again, err := d.Marshal()
		if err != nil {
			t.Fatalf("accepted %q does not marshal: %v", b, err)
		}
		d2, err := ParseWorkspaceDoc(again)
		if err != nil || !cmp.Equal(d, d2, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") })) {
			t.Fatalf("canonical form does not read back: %q -> %q (%v)", b, again, err)
		}
	})
}
