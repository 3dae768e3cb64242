package workerbin

import (
	"debug/buildinfo"
	"fmt"
	"io"
	"runtime/debug"
	"sync"

	"github.com/agora-dev/agora/internal/version"
)

// Build is what must agree between agora and its worker: the module version and the VCS
// revision they were built from. An empty field is not compared (a build without VCS
// information, such as a test binary, has no revision to agree on).
type Build struct {
	Version  string // the main module's version; "(devel)" is not compared
	Revision string // vcs.revision
	Modified string // vcs.modified: "true" or "false"
	Tags     string // -tags: compared only for version.WeakenTag, which must agree both ways
}

func (b Build) String() string {
	s := "agora " + b.Version
	if b.Revision != "" {
		s += " (commit " + b.Revision
		if b.Modified == "true" {
			s += ", modified"
		}
		s += ")"
	}
	if version.Weakened(b.Tags) {
		s += " built with -tags " + version.WeakenTag + " (controls off on purpose: not for use)"
	}
	return s
}

func buildOf(info *debug.BuildInfo) Build {
	b := Build{Version: info.Main.Version}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value
		case "-tags":
			b.Tags = s.Value
		}
	}
	return b
}

// Self is the running agora's Build, from its own build information (read once: every pin
// compares against it).
func Self() Build { return self() }

var self = sync.OnceValue(func() Build {
	if info, ok := debug.ReadBuildInfo(); ok {
		return buildOf(info)
	}
	return Build{}
})

// checkBuild reads the worker's build information from its bytes and checks that it is
// cmd/agora-worker built from want's source.
func checkBuild(path string, r io.ReaderAt, want Build) (Build, error) {
	info, err := buildinfo.Read(r)
	if err != nil {
		return Build{}, &MissingError{Path: path, Err: fmt.Errorf("not a Go program with build information: %w", err)}
	}
	if info.Path != MainPath {
		return Build{}, &MissingError{Path: path, Err: fmt.Errorf("it is %q, not %s", info.Path, MainPath)}
	}
	got := buildOf(info)
	if !want.accepts(got) {
		return Build{}, &MismatchError{Path: path, Got: got.String(), Want: want.String()}
	}
	return got, nil
}

// accepts reports whether a worker built as got agrees with want (this agora's build). A
// worker built with version.WeakenTag (selftest's control test's, which vouches for what the
// agent left) has the version and commit of a real one: only an agora built with the tag
// takes it, and such an agora takes no other, whatever else is compared.
func (want Build) accepts(got Build) bool {
	if version.Weakened(want.Tags) != version.Weakened(got.Tags) {
		return false
	}
	return !(want.Version != "" && want.Version != "(devel)" && got.Version != want.Version ||
		want.Revision != "" && (got.Revision != want.Revision || got.Modified != want.Modified))
}
