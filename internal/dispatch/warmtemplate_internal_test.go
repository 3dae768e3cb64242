package dispatch

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// TestParseTemplate_RoundTrip: what writeTemplate stores reads back with the same shape;
// a template that would start nothing, or that is not exact JSON, is refused.
func TestParseTemplate_RoundTrip(t *testing.T) {
	dir := t.TempDir()
	spec := compute.Spec{Argv: []string{"/agora/bin/agora-worker", "worker"}, Env: []string{"PATH=/usr/bin", "AGORA_DISPATCH_ID=X"}, Dir: "/agora/workspace",
		Binds:  []compute.Bind{{Src: "/host/a", Dst: "/agora/bundle"}, {Src: "/usr/bin/claude", Dst: "/usr/local/bin/claude"}},
		Limits: compute.Limits{MaxProcs: 64}}
	if err := writeTemplate(dir, "local", spec); err != nil {
		t.Fatal(err)
	}
	got, err := readTemplate(dir, "local")
	if err != nil {
		t.Fatal(err)
	}
	if want := templateOf(dir, "local", spec).ID; got.ID != want {
		t.Errorf("shape read back %s, want %s", got.ID, want)
	}
	for name, doc := range map[string]string{
		"no argv":        `{"argv":[],"env":[],"dir":"","network":false,"sandbox":"","limits":{},"binds":[],"files":0}`,
		"sandbox none":   `{"argv":["x"],"sandbox":"none"}`,
		"many files":     `{"argv":["x"],"files":99}`,
		"duplicate key":  `{"argv":["x"],"argv":["y"]}`,
		"folded key":     `{"Argv":["x"]}`,
		"unknown key":    `{"argv":["x"],"runas":{"UID":0}}`,
		"not an object":  `[]`,
		"negative files": `{"argv":["x"],"files":-1}`,
	} {
		if _, err := parseTemplate([]byte(doc)); err == nil {
			t.Errorf("%s: parseTemplate(%s) accepted it", name, doc)
		}
	}
}

func FuzzParseTemplate(f *testing.F) {
	b, _ := json.Marshal(warmTemplate{Argv: []string{"w"}, Binds: []compute.Bind{{Src: "/a", Dst: "/agora/b"}}, Files: 1})
	f.Add(b)
	f.Add([]byte(`{"argv":["x"],"files":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, err := parseTemplate(b)
		if err != nil {
			return
		}
		if len(spec.Argv) == 0 || len(spec.Files) > 8 || spec.Sandbox == compute.SandboxNone || spec.RunAs != nil {
			t.Fatalf("parseTemplate(%q) = %+v", b, spec)
		}
	})
}
