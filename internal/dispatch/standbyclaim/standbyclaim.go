// Package standbyclaim reads the claim line of the standby protocol (dispatch's standby.go):
// "claim ID", the dispatch id a holder hands a standby supervisor. It runs on the host in the
// standby, over a line from its holder, imports only the standard library, and lives apart
// from dispatch so its fuzz target builds without dispatch's import graph.
package standbyclaim

import (
	"fmt"
	"strings"
)

// Parse reads the holder's claim line (without its newline): the dispatch id it hands over.
// The id is checked for its form only; the supervisor reads the rest from agora.db.
func Parse(line string) (string, error) {
	id, ok := strings.CutPrefix(line, "claim ")
	if !ok {
		return "", fmt.Errorf("standby: want %q, got %q", "claim ID", clip(line))
	}
	if err := checkDispatchID(id); err != nil {
		return "", fmt.Errorf("standby: %w", err)
	}
	return id, nil
}

// checkDispatchID accepts the ids agora makes (ULIDs; the orchestrator's attempt ids):
// 1-128 characters of letters, digits, '-', '_' and '.', starting with a letter or digit
// (never an option, a dot file or a path).
func checkDispatchID(id string) error {
	if id == "" || len(id) > 128 || !(id[0] >= 'a' && id[0] <= 'z' || id[0] >= 'A' && id[0] <= 'Z' || id[0] >= '0' && id[0] <= '9') {
		return fmt.Errorf("dispatch id %q: want 1-128 letters, digits, '-', '_' or '.', starting with a letter or digit", clip(id))
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("dispatch id %q: want 1-128 letters, digits, '-', '_' or '.'", clip(id))
		}
	}
	return nil
}

// clip shortens what an error quotes back to 64 bytes.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
