package cli

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/agora-dev/agora", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "bedde79abc"}, {Key: "vcs.time", Value: "2026-11-23T09:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tt := range []struct {
		name string
		read func() (*debug.BuildInfo, bool)
		want versionInfo
	}{
		{"Checkout", func() (*debug.BuildInfo, bool) { return bi, true },
			versionInfo{Version: "(devel)", Revision: "bedde79abc", Time: "2026-11-23T09:00:00Z", Modified: true, GoVersion: "go1.26.0", Module: "github.com/agora-dev/agora"}},
		{"NoBuildInfo", func() (*debug.BuildInfo, bool) { return nil, false },
			versionInfo{Version: "unknown", GoVersion: "unknown", Module: "github.com/agora-dev/agora"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, readVersion(tt.read)); diff != "" {
				t.Errorf("readVersion (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionRun(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}
	for _, output := range []string{formatTable, formatJSON} {
		var out bytes.Buffer
		f := NewFactory(&IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}, func(string) string { return "" })
		opts := &versionOptions{printOptions: printOptions{f: f, output: output}, read: func() (*debug.BuildInfo, bool) { return bi, true }}
		if err := versionRun(t.Context(), opts); err != nil {
			t.Fatal(err)
		}
		if output == formatJSON {
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

func TestFormatVersion(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    versionInfo
		want string
	}{
		{"Clean", versionInfo{Version: "(devel)", Revision: "bedde79", Time: "2026-11-23T09:00:00Z", GoVersion: "go1.26.8"},
			"agora (devel)\ncommit bedde79 (2026-11-23T09:00:00Z)\ngo1.26.8\n"},
		{"Modified", versionInfo{Version: "(devel)", Revision: "bedde79", Time: "2026-11-23T09:00:00Z", Modified: true, GoVersion: "go1.26.8"},
			"agora (devel)\ncommit bedde79+modified (2026-11-23T09:00:00Z)\ngo1.26.8\n"},
		{"NoTime", versionInfo{Version: "v1.2.3", Revision: "abc", GoVersion: "go1.26.8"},
			"agora v1.2.3\ncommit abc (-)\ngo1.26.8\n"},
		{"NoVCS", versionInfo{Version: "(devel)", GoVersion: "go1.26.8"},
			"agora (devel)\n" + noVCS + "\ngo1.26.8\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatVersion(tt.v); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
