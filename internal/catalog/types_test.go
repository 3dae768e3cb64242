package catalog_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
)

func TestCheckName(t *testing.T) {
	good := []string{"a", "0", "repo-tools", "a.b_c-d", "x" + strings.Repeat("y", 62) + "z"}
	bad := []string{"", "-a", "a-", "A", "a b", "a/b", "a@b", ".a", "x" + strings.Repeat("y", 63) + "z", "ü"}
	for _, n := range good {
		if err := catalog.CheckName(catalog.KindCapability, n); err != nil {
			t.Errorf("CheckName(%q) = %v, want ok", n, err)
		}
	}
	for _, n := range bad {
		err := catalog.CheckName(catalog.KindSubagent, n)
		if err == nil || !strings.HasPrefix(err.Error(), "invalid subagent name") {
			t.Errorf("CheckName(%q) = %v, want an invalid subagent name error", n, err)
		}
	}
}

func TestParseRef(t *testing.T) {
	d := digest.Sum([]byte("x"))
	tests := []struct {
		ref        string
		name       string
		digest     digest.Digest
		wantErrSub string
	}{
		{"tools", "tools", "", ""},
		{"tools@" + string(d), "tools", d, ""},
		{"tools@sha256:abc", "", "", `capability reference "tools@sha256:abc"`},
		{"tools@", "", "", "digest"},
		{"Tools", "", "", "invalid capability name"},
		{"@" + string(d), "", "", "invalid capability name"},
	}
	for _, tt := range tests {
		name, digest, err := catalog.ParseRef(catalog.KindCapability, tt.ref)
		if tt.wantErrSub != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErrSub) {
				t.Errorf("ParseRef(%q) = %q %q %v, want an error containing %q", tt.ref, name, digest, err, tt.wantErrSub)
			}
			continue
		}
		if err != nil || name != tt.name || digest != tt.digest {
			t.Errorf("ParseRef(%q) = %q %q %v, want %q %q", tt.ref, name, digest, err, tt.name, tt.digest)
		}
	}
}

func TestKind_Words(t *testing.T) {
	tests := []struct {
		k           catalog.Kind
		str, plural string
	}{
		{catalog.KindCapability, "capability", "capabilities"},
		{catalog.KindSubagent, "subagent", "subagents"},
		{catalog.KindEnv, "env bundle", "env bundles"},
	}
	for _, tt := range tests {
		if tt.k.String() != tt.str || tt.k.Plural() != tt.plural {
			t.Errorf("%q: String %q Plural %q, want %q %q", string(tt.k), tt.k.String(), tt.k.Plural(), tt.str, tt.plural)
		}
	}
	v := catalog.Version{Name: "n", Digest: "sha256:ab"}
	if v.Ref() != "n@sha256:ab" {
		t.Errorf("Ref = %q", v.Ref())
	}
}

func TestSubagentDoc_MarshalParse(t *testing.T) {
	doc := catalog.SubagentDoc{
		Description:  "reviews code",
		Runtime:      "claude-code",
		Model:        "m",
		SystemPrompt: "You review.\n\"quoted\" <b>",
		Capabilities: []catalog.Pin{{Name: "tools", Digest: digest.Sum([]byte("t"))}},
	}
	b, err := doc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"capabilities":[{"digest":"` + string(digest.Sum([]byte("t"))) + `","name":"tools"}],"command":[],"description":"reviews code",` +
		`"model":"m","runtime":"claude-code","system_prompt":"You review.\n\"quoted\" <b>","version":1}`
	if string(b) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", b, want)
	}
	got, err := catalog.ParseSubagentDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	doc.Command = []string{}
	if diff := cmp.Diff(doc, got); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
	// The same content always has the same bytes; a different prompt does not.
	b2, _ := doc.Marshal()
	doc.SystemPrompt += " "
	b3, _ := doc.Marshal()
	if string(b2) != string(b) || string(b3) == string(b) {
		t.Errorf("Marshal is not a function of the content")
	}
	if _, err := catalog.ParseSubagentDoc([]byte(`{"version":2}`)); err == nil || !strings.Contains(err.Error(), "unsupported version 2") {
		t.Errorf("ParseSubagentDoc(version 2) = %v", err)
	}
	if _, err := catalog.ParseSubagentDoc([]byte(`{`)); err == nil {
		t.Errorf("ParseSubagentDoc(garbage) succeeded")
	}
}

func TestEnvDoc_MarshalParse(t *testing.T) {
	empty, err := catalog.EnvDoc{}.Marshal()
	if err != nil || string(empty) != `{"secrets":{},"values":{},"version":1}` {
		t.Errorf("empty EnvDoc = %s, %v", empty, err)
	}
	doc := catalog.EnvDoc{Values: map[string]string{"B": "2", "A": "1"}, Secrets: map[string]string{"TOKEN": "ref1"}}
	b, err := doc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"secrets":{"TOKEN":"ref1"},"values":{"A":"1","B":"2"},"version":1}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	got, err := catalog.ParseEnvDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc, got); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
	if _, err := catalog.ParseEnvDoc([]byte(`{"version":0}`)); err == nil {
		t.Errorf("ParseEnvDoc(version 0) succeeded")
	}
}

func TestSortedKeys(t *testing.T) {
	if diff := cmp.Diff([]string{"a", "b", "c"}, catalog.SortedKeys(map[string]int{"c": 1, "a": 2, "b": 3})); diff != "" {
		t.Errorf("SortedKeys mismatch (-want +got):\n%s", diff)
	}
	if got := catalog.SortedKeys(map[string]bool(nil)); got == nil || len(got) != 0 {
		t.Errorf("SortedKeys(nil) = %#v, want empty non-nil", got)
	}
}
