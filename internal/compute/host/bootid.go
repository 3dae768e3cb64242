// Package host reads what the host's kernel says about its processes, mounts and boot: the
// facts a supervisor checks before it signals, unmounts or trusts an identity it did not make.
// It runs on the host side, below every provider and the dispatch, and starts nothing.
package host

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// bootIDFile holds the kernel's random id of the running boot: a new UUID each boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// bootIDLen is the length of a boot id as identities carry it: the UUID's 32 hex digits,
// lowercase, without its dashes (no ':' and no '-', so it is one field of a task id or a
// supervisor name, and of one canonical spelling).
const bootIDLen = 32

// errNoBootID means this process could not learn the running boot's id.
var errNoBootID = errors.New("no boot id")

// bootID is this boot's id, read once per process (the file does not change within a boot)
// and only when first asked for: nothing is read at package init.
var bootID struct {
	once sync.Once
	id   string
	err  error
}

// BootID returns the running boot's id in the form identities carry it (32 lowercase hex
// digits), read from /proc/sys/kernel/random/boot_id once per process.
//
// A pid and a start time (clock ticks since boot) both restart at boot, so an identity of a
// process persisted across a reboot (a dispatch's supervisor, a local task id) can name a
// process of the new boot with the same pid and start, which a deterministic VM or container
// boot that starts agora at once makes likely. Bound to the boot that made it, such an
// identity is dead in every later boot.
func BootID() (string, error) {
	bootID.once.Do(func() {
		b, err := os.ReadFile(bootIDFile)
		if err != nil {
			bootID.err = fmt.Errorf("read boot id: %w", err)
			return
		}
		bootID.id, bootID.err = parseBootID(string(b))
	})
	return bootID.id, bootID.err
}

// parseBootID turns the kernel's boot id ("1e5d60f7-d31e-428c-880a-01a7164013cb\n") into
// the form identities carry: its hex digits, lowercase, without the dashes.
func parseBootID(s string) (string, error) {
	s = strings.TrimSuffix(s, "\n")
	const uuidLen = 36
	if len(s) != uuidLen {
		return "", fmt.Errorf("boot id %q: %w", s, errNoBootID)
	}
	var b strings.Builder
	b.Grow(bootIDLen)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return "", fmt.Errorf("boot id %q: %w", s, errNoBootID)
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			b.WriteByte(c)
		case c >= 'A' && c <= 'F':
			b.WriteByte(c - 'A' + 'a')
		default:
			return "", fmt.Errorf("boot id %q: %w", s, errNoBootID)
		}
	}
	return b.String(), nil
}

// IsBootID reports whether s is a boot id in the form identities carry: exactly 32
// lowercase hex digits.
func IsBootID(s string) bool {
	if len(s) != bootIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
