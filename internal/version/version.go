// Package version says which build of agora a program is, from the build information the Go
// toolchain embeds, in the words `agora version` prints. The front (cmd/agora) answers
// `agora version` with it from agora-full's file, without starting agora-full; agora-full
// answers from its own memory. Both print the same bytes.
package version

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
)

// Info is what `agora version` prints: a release records its module version; a build from a
// checkout records the commit, its time and whether the tree was modified.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	Module    string `json:"module"`
}

// From reads bi. A binary built without build information (a test binary, a stripped
// build: bi nil) says "unknown" rather than inventing a version.
func From(bi *debug.BuildInfo) Info {
	v := Info{Version: "unknown", GoVersion: "unknown", Module: "github.com/agora-dev/agora"}
	if bi == nil {
		return v
	}
	v.GoVersion = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version // "(devel)" for a build from a checkout
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// NoVCS is the commit line of a binary the toolchain stamped no VCS information into.
const NoVCS = "commit unknown: built without VCS information (go run, go build -buildvcs=false, or outside a git checkout)"

// Text is the version, the commit (or why there is none) and the Go version, a line each.
func (v Info) Text() string {
	commit := NoVCS
	if v.Revision != "" {
		commit = "commit " + v.Revision
		if v.Modified {
			commit += "+modified"
		}
		t := v.Time
		if t == "" {
			t = "-"
		}
		commit += " (" + t + ")"
	}
	return fmt.Sprintf("agora %s\n%s\n%s\n", v.Version, commit, v.GoVersion)
}

// WriteJSON writes v as every agora command's --output json writes a result: indented by two
// spaces, HTML characters as they are, one trailing newline.
func (v Info) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
