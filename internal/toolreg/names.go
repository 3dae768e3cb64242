package toolreg

import "slices"

// Builtin names the tools agora ships. A capability's `tools` list may name only these.
var Builtin = []string{
	"ask_human",
	"http_fetch",
	"list_files",
	"read_file",
	"run_command",
	"search_files",
	"write_file",
}

// IsBuiltin reports whether name is a tool agora ships.
func IsBuiltin(name string) bool { return slices.Contains(Builtin, name) }
