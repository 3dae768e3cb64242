package main

import (
	"debug/buildinfo"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/agora-dev/agora/internal/version"
)

// fullPackage is agora-full's main package, as its build information names it.
const fullPackage = "github.com/agora-dev/agora/cmd/agora-full"

// answerVersion answers `agora version`, as agora-full reads its --output (table or json),
// from the build information in agora-full's file: the same bytes agora-full prints, without
// starting the 60 MB program and its package inits. It reports false for any other command
// line, and whenever the file is not surely the agora-full that an exec would run here and
// that would print those bytes: agora-full is then run, and says what it says (or the exec
// says why it cannot run).
func answerVersion(full string, args []string, w io.Writer) (bool, error) {
	output, ok := versionOutput(args)
	if !ok {
		return false, nil
	}
	bi, ok := runnableFull(full)
	if !ok {
		return false, nil
	}
	v := version.From(bi)
	if output == "json" {
		return true, v.WriteJSON(w)
	}
	_, err := io.WriteString(w, v.Text())
	return true, err
}

// runnableFull is the build information of full when full is a regular file this process
// may execute (not a FIFO, whose open would wait for a writer, nor a file an exec refuses),
// built as agora-full (a program of another main package, or one whose build carries no
// module information, prints something else or nothing of the kind) for this system and
// architecture (any other fails to exec).
func runnableFull(full string) (*debug.BuildInfo, bool) {
	fi, err := os.Stat(full)
	if err != nil || !fi.Mode().IsRegular() || syscall.Access(full, 1 /* X_OK */) != nil {
		return nil, false
	}
	bi, err := buildinfo.ReadFile(full)
	if err != nil || bi.Path != fullPackage || bi.Main.Path == "" {
		return nil, false
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		return nil, false
	}
	return bi, true
}

// versionOutput is the --output of a command line that is exactly `version` with at most
// --output table|json (-o, --output VALUE or --output=VALUE); ok is false for anything else,
// which is left to agora-full and its errors and help.
func versionOutput(args []string) (output string, ok bool) {
	if len(args) == 0 || args[0] != "version" {
		return "", false
	}
	switch rest := args[1:]; {
	case len(rest) == 0:
		return "table", true
	case len(rest) == 2 && (rest[0] == "-o" || rest[0] == "--output"):
		output = rest[1]
	case len(rest) == 1 && len(rest[0]) > len("--output=") && rest[0][:len("--output=")] == "--output=":
		output = rest[0][len("--output="):]
	default:
		return "", false
	}
	return output, output == "table" || output == "json"
}
