package main

import (
	"debug/buildinfo"
	"io"

	"github.com/agora-dev/agora/internal/version"
)

// answerVersion answers `agora version`, as agora-full reads its --output (table or json),
// from the build information in agora-full's file: the same bytes agora-full prints, without
// starting the 60 MB program and its package inits. It reports false for any other command
// line, and for a file it cannot read the information from: agora-full answers those.
func answerVersion(full string, args []string, w io.Writer) (bool, error) {
	output, ok := versionOutput(args)
	if !ok {
		return false, nil
	}
	bi, err := buildinfo.ReadFile(full)
	if err != nil {
		return false, nil
	}
	v := version.From(bi)
	if output == "json" {
		return true, v.WriteJSON(w)
	}
	_, err = io.WriteString(w, v.Text())
	return true, err
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
