package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/compute"
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
// up ([compute.SandboxUIDs]: the scheme is the providers', which hold no config).
const SandboxUIDs = compute.SandboxUIDs

// Range is the first and last uid of the range that starts at u (capped below 2^31).
func (u UID) Range() (first, last uint32) { return compute.SandboxUIDRange(uint32(u)) }

// For is the uid of the range that dispatch id runs as by default (FNV-1a of the id).
func (u UID) For(id string) uint32 { return compute.SandboxUIDFor(uint32(u), id) }
