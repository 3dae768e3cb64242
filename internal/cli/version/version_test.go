package version

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

func TestVersionRun(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}
	for _, output := range []string{cmdutil.FormatTable, cmdutil.FormatJSON} {
		var out bytes.Buffer
		f := cmdutil.NewFactory(&cmdutil.IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}, func(string) string { return "" })
		opts := &versionOptions{PrintOptions: cmdutil.PrintOptions{F: f, Output: output}, read: func() (*debug.BuildInfo, bool) { return bi, true }}
		if err := versionRun(t.Context(), opts); err != nil {
			t.Fatal(err)
		}
		if output == cmdutil.FormatJSON {
			var got map[string]any
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("-o json: %v\n%s", err, out.String())
			}
			if got["version"] != "v1.2.3" || got["revision"] != "abc" || got["go_version"] != "go1.26.0" || got["modified"] != false {
				t.Errorf("-o json: got %v", got)
			}
			continue
		}
		if want := "agora v1.2.3\ncommit abc (-)\ngo1.26.0\n"; out.String() != want {
			t.Errorf("got %q, want %q", out.String(), want)
		}
		if strings.Contains(out.String(), "{") {
			t.Errorf("table output is JSON")
		}
	}
}
