// Package version says which build of agora a program is, from the build information the Go
// toolchain embeds, in the words `agora version` prints. The front (cmd/agora) answers
// `agora version` with it from agora-full's file, without starting agora-full; agora-full
// answers from its own memory. Both print the same bytes.
package version

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
)

// Info is what `agora version` prints: a release records its module version; a build from a
// checkout records the commit, its time and whether the tree was modified.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified"`
	Tags      string `json:"tags,omitempty"` // the build's -tags, comma-separated
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
		case "-tags":
			v.Tags = s.Value
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
		t := cmp.Or(v.Time, "-")
		commit += " (" + t + ")"
	}
	out := fmt.Sprintf("agora %s\n%s\n%s\n", v.Version, commit, v.GoVersion)
	if v.Tags != "" {
		out += "built with -tags " + v.Tags + "\n"
	}
	if v.Weakened() {
		out += WeakenedWords + "\n"
	}
	return out
}

// WriteJSON writes v as every agora command's --output json writes a result: indented by two
// spaces, HTML characters as they are, one trailing newline.
func (v Info) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WeakenTag is the build tag under which agora's verify gate, agora verify, model gateway and
// worker skip a check on purpose, for selftest's control test alone (docs/selftest.md,
// "Control tests"). Such a build has the same module version and commit as a real one, so
// what tells them apart is its tags, which `agora version` prints and the worker pin compares.
const WeakenTag = "agora_weaken"

// WeakenedWords is what `agora version` adds for a build with WeakenTag.
const WeakenedWords = "WEAKENED: built with -tags " + WeakenTag + ", whose controls are off on purpose for selftest's control test: not for use"

// Weakened reports whether the build carries WeakenTag.
func (v Info) Weakened() bool { return Weakened(v.Tags) }

// Weakened reports whether tags (a build's -tags setting, comma-separated) holds WeakenTag.
func Weakened(tags string) bool { return slices.Contains(strings.Split(tags, ","), WeakenTag) }

// Short is this program's release version, "dev" for a build from a checkout (or without
// build information): what agora mcp names itself in initialize, and what the network gateway
// tells a pod's worker to match when it has no worker program to read.
func Short() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
