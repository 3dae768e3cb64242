// Package logline finds the last line of a sandbox's log for a live dispatch's progress. It
// runs on the host over bytes the agent wrote, imports only the standard library, and lives
// apart from dispatch so its fuzz target builds without dispatch's import graph.
package logline

import "bytes"

// Last is the last line of b with anything but white space on it, trimmed.
func Last(b []byte) string {
	for len(b) > 0 {
		b = bytes.TrimRight(b, " \t\r\n")
		i := bytes.LastIndexByte(b, '\n')
		if line := bytes.TrimSpace(b[i+1:]); len(line) > 0 {
			return string(line)
		}
		if i < 0 {
			break
		}
		b = b[:i]
	}
	return ""
}
