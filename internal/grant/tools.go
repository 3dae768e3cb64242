package grant

import "slices"

// BuiltinTools names the tools agora ships. A grant's Tools may name only these.
var BuiltinTools = []string{
	"ask_human",
	"http_fetch",
	"list_files",
	"read_file",
	"run_command",
	"search_files",
	"write_file",
}

// IsBuiltinTool reports whether name is a tool agora ships.
func IsBuiltinTool(name string) bool { return slices.Contains(BuiltinTools, name) }
