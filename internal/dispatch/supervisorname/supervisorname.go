// Package supervisorname reads the name a dispatch's record gives its supervising process,
// "<pid>:<start>:<boot id>", in its one canonical form. It runs on the host over names read
// back from agora.db, and lives apart from dispatch (which writes the names and judges them)
// so its fuzz target builds without dispatch's import graph.
package supervisorname

import (
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/compute/host"
)

// Parse parses a supervisor name in its one canonical form: "<pid>:<start>:<boot>" or,
// written before boot ids, "<pid>:<start>" (boot ""); pid and start are decimal with no sign
// or leading zeros, pid at least 1, boot as [host.IsBootID] has it. A name is read back from
// the database, so anything else is malformed (ok false), never guessed at.
func Parse(s string) (pid int, start uint64, boot string, ok bool) {
	f := strings.Split(s, ":")
	switch len(f) {
	case 3:
		boot = f[2]
		if !host.IsBootID(boot) {
			return 0, 0, "", false
		}
	case 2:
	default:
		return 0, 0, "", false
	}
	p, err1 := strconv.ParseUint(f[0], 10, 31)
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || p < 1 ||
		strconv.FormatUint(p, 10) != f[0] || strconv.FormatUint(start, 10) != f[1] {
		return 0, 0, "", false
	}
	return int(p), start, boot, true
}
