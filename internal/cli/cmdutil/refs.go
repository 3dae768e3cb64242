package cmdutil

import (
	"os"
	"strings"
)

// SplitWorkspace splits NAME[@sha256:HEX][@REV] at the last '@'; a last part that is a
// version digest (sha256:...) belongs to the name.
func SplitWorkspace(s string) (name, rev string) {
	i := strings.LastIndex(s, "@")
	if i < 0 || strings.HasPrefix(s[i+1:], "sha256:") {
		return s, ""
	}
	return s[:i], s[i+1:]
}

// SplitRepo splits PATH@REV at the last '@'. A PATH that exists as given (a directory whose
// name holds an '@') is taken whole.
func SplitRepo(s string) (string, string) {
	i := strings.LastIndex(s, "@")
	if i <= 0 {
		return s, ""
	}
	if fi, err := os.Stat(s); err == nil && fi.IsDir() {
		return s, ""
	}
	return s[:i], s[i+1:]
}
