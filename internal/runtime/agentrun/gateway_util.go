package agentrun

import "strings"

// truncate cuts s to at most n bytes without leaving a split UTF-8 sequence.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
