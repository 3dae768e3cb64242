package version

import (
	"bytes"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFrom(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/agora-dev/agora", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "bedde79abc"}, {Key: "vcs.time", Value: "2026-11-23T09:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{"Checkout", bi, Info{Version: "(devel)", Revision: "bedde79abc", Time: "2026-11-23T09:00:00Z", Modified: true, GoVersion: "go1.26.0", Module: "github.com/agora-dev/agora"}},
		{"NoBuildInfo", nil, Info{Version: "unknown", GoVersion: "unknown", Module: "github.com/agora-dev/agora"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, From(tt.bi)); diff != "" {
				t.Errorf("From (-want +got):\n%s", diff)
			}
		})
	}
}

func TestText(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    Info
		want string
	}{
		{"Clean", Info{Version: "(devel)", Revision: "bedde79", Time: "2026-11-23T09:00:00Z", GoVersion: "go1.26.8"},
			"agora (devel)\ncommit bedde79 (2026-11-23T09:00:00Z)\ngo1.26.8\n"},
		{"Modified", Info{Version: "(devel)", Revision: "bedde79", Time: "2026-11-23T09:00:00Z", Modified: true, GoVersion: "go1.26.8"},
			"agora (devel)\ncommit bedde79+modified (2026-11-23T09:00:00Z)\ngo1.26.8\n"},
		{"NoTime", Info{Version: "v1.2.3", Revision: "abc", GoVersion: "go1.26.8"},
			"agora v1.2.3\ncommit abc (-)\ngo1.26.8\n"},
		{"NoVCS", Info{Version: "(devel)", GoVersion: "go1.26.8"},
			"agora (devel)\n" + NoVCS + "\ngo1.26.8\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.Text(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWriteJSON: the shape every --output json has (two-space indent, no HTML escaping, one
// newline), and a revision that is absent is left out rather than written empty.
func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := (Info{Version: "v1<2>", GoVersion: "go1.26.0", Module: "m"}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"version\": \"v1<2>\",\n  \"modified\": false,\n  \"go_version\": \"go1.26.0\",\n  \"module\": \"m\"\n}\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
