package doctor

import (
	"bytes"
	"strconv"
)

// maxIDFile caps what [ParseIDs] reads of /etc/passwd or /etc/group.
const maxIDFile = 4 << 20

// ParseIDs maps the numeric ids of an /etc/passwd or /etc/group file (the third field of
// each "name:password:id:..." line) to their names. Lines that do not parse are skipped:
// the result only answers "does an entry own this id", and a malformed line owns none.
func ParseIDs(b []byte) map[uint32]string {
	b = b[:min(len(b), maxIDFile)]
	ids := map[uint32]string{}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		f := bytes.SplitN(line, []byte{':'}, 4)
		if len(f) < 3 || len(f[0]) == 0 {
			continue
		}
		id, err := strconv.ParseUint(string(f[2]), 10, 32)
		if err != nil {
			continue
		}
		if _, seen := ids[uint32(id)]; !seen {
			ids[uint32(id)] = string(f[0])
		}
	}
	return ids
}
