package warmtemplate

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// TestParse_Refuses: a template that would start nothing, or that is not exact JSON, is
// refused.
func TestParse_Refuses(t *testing.T) {
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
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: Parse(%s) accepted it", name, doc)
		}
	}
}

func FuzzParseTemplate(f *testing.F) {
	b, _ := json.Marshal(Template{Argv: []string{"w"}, Binds: []compute.Bind{{Src: "/a", Dst: "/agora/b"}}, Files: 1})
	f.Add(b)
	f.Add([]byte(`{"argv":["x"],"files":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, err := Parse(b)
		if err != nil {
			return
		}
		if len(spec.Argv) == 0 || len(spec.Files) > 8 || spec.Sandbox == compute.SandboxNone || spec.RunAs != nil {
			t.Fatalf("Parse(%q) = %+v", b, spec)
		}
	})
}
