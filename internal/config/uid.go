package config

import (
	"fmt"
	"strconv"
	"strings"
)

// UID is a host user id (also used as the group id) written in decimal or as 0x-prefixed
// hex. It is never 0 (root) and stays below 2^31: ids from there up are mishandled by some
// kernel interfaces (setfsuid, devpts) and are reserved by systemd.
type UID uint32

// maxUID is the largest accepted [UID].
const maxUID = 1<<31 - 1

// UnmarshalText parses "1879048192" or "0x70000000".
func (u *UID) UnmarshalText(text []byte) error {
	s := strings.ReplaceAll(strings.TrimSpace(string(text)), "_", "")
	base := 10
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		s, base = h, 16
	}
	// Only decimal and 0x hex: a leading 0 read as octal would silently name another uid.
	v, err := strconv.ParseUint(s, base, 32)
	if err != nil || strings.HasPrefix(s, "+") || (base == 10 && len(s) > 1 && s[0] == '0') {
		return fmt.Errorf("want a uid such as 1879048192 or 0x70000000, got %q", string(text))
	}
	if v == 0 {
		return fmt.Errorf("0 is root: sandboxes never run as root; use an unused uid such as %d", DefaultSandboxUID)
	}
	if v > maxUID {
		return fmt.Errorf("%d is 2^31 or above, which some kernel interfaces mishandle; use an unused uid below 2147483648", v)
	}
	*u = UID(v)
	return nil
}

// SandboxUIDs is how many host uids a target's sandboxes spread over, from its sandbox_uid
// up. Each dispatch runs as one of them, chosen by its id: the kernel keeps some counters
// per host uid across namespaces (inotify instances and watches, POSIX message queue bytes,
// pending signals), and with one uid for every sandbox one dispatch could spend them for all
// the others (issue #11 red team). Two concurrent dispatches share a uid only by chance.
const SandboxUIDs = 1 << 16

// Range is the first and last uid of the range that starts at u (capped below 2^31).
func (u UID) Range() (first, last uint32) {
	first = uint32(u)
	last = uint32(min(uint64(u)+SandboxUIDs-1, maxUID))
	return first, last
}

// For is the uid of the range that dispatch id runs as (FNV-1a of the id).
func (u UID) For(id string) uint32 {
	first, last := u.Range()
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return first + h%(last-first+1)
}
