package claudert

// AgoraTool is the agora tool that covers Claude Code's tool name as its hooks report a call
// (names only: a bare Bash is run_command here, whatever commands a grant then names).
// TodoWrite needs no grant: "" and true. Unknown names: "" and false. It is the one place
// outside the translation itself that reads Claude Code's names, for readers of its audit
// (agora capability suggest). A switch, not a map: no table is built at init.
func AgoraTool(name string) (string, bool) {
	switch name {
	case ccRead:
		return "read_file", true
	case ccEdit, ccWrite:
		return "write_file", true
	case ccGlob:
		return "list_files", true
	case ccGrep:
		return "search_files", true
	case ccBash:
		return "run_command", true
	case ccWebFetch:
		return "http_fetch", true
	case ccTodoWrite:
		return "", true
	}
	return "", false
}
