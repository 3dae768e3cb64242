// Package kubetext makes what a kubelet or a registry wrote safe to show: control characters
// and characters that reorder or hide text become spaces, and the text is cut at a bound. It
// runs on the host over pod statuses, imports only the standard library and [agenttext], and
// lives apart from the kubernetes provider (which links client-go) so its fuzz target builds
// without the provider's import graph.
package kubetext

import (
	"strings"

	"github.com/agora-dev/agora/internal/agenttext"
)

// Printable is s with every control character, and every character that reorders or hides
// text (agenttext.Hidden: bidirectional controls, line separators, zero-width and tag
// characters), a space, cut at limit bytes (on a rune boundary): the kubelet's message, which
// a registry shapes, goes into a record, a terminal and MCP output, and not every reader
// escapes what it shows.
func Printable(s string, limit int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len()+len(string(r)) > limit {
			b.WriteString("...")
			break
		}
		if r < 0x20 || agenttext.Hidden(r) {
			r = ' '
		}
		b.WriteRune(r)
	}
	return b.String()
}
