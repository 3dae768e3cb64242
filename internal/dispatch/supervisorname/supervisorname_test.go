package supervisorname

import (
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute/host"
)

// otherBoot is a boot id no real boot has had.
const otherBoot = "0123456789abcdef0123456789abcdef"

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in    string
		pid   int
		start uint64
		boot  string
		ok    bool
	}{
		{in: "123:456:" + otherBoot, pid: 123, start: 456, boot: otherBoot, ok: true},
		{in: "1:0:" + otherBoot, pid: 1, start: 0, boot: otherBoot, ok: true},
		{in: "123:456", pid: 123, start: 456, ok: true}, // before boot ids
		{in: "1:18446744073709551615", pid: 1, start: 1<<64 - 1, ok: true},
		{in: ""},
		{in: "123"},
		{in: "0:1"},
		{in: "-1:1"},
		{in: "+1:1"},
		{in: "01:1"},
		{in: "1:01"},
		{in: "1:-1"},
		{in: "2147483648:1"},
		{in: "1:18446744073709551616"},
		{in: "1:2:"},
		{in: ":1:" + otherBoot},
		{in: "1::" + otherBoot},
		{in: "1:2:" + strings.ToUpper(otherBoot)},
		{in: "1:2:" + otherBoot[:31]},
		{in: "1:2:" + otherBoot + "0"},
		{in: "1:2:0123456789-abcdef0123456789abcdef"},
		{in: "1:2:" + otherBoot + ":3"},
		{in: otherBoot + ":1:2"},
		{in: "1:2:3"},
		{in: " 1:2"},
		{in: "1:2\n"},
	} {
		pid, start, boot, ok := Parse(tt.in)
		if ok != tt.ok || pid != tt.pid || start != tt.start || boot != tt.boot {
			t.Errorf("Parse(%q) = %d, %d, %q, %v; want %d, %d, %q, %v", tt.in, pid, start, boot, ok, tt.pid, tt.start, tt.boot, tt.ok)
		}
	}
}

// FuzzParseSupervisor: a supervisor name is read back from the database, so any string may
// reach the parser: it never panics, and what it accepts is canonical (formatted again from
// its parts, it is the same string) with a pid of at least 1.
func FuzzParseSupervisor(f *testing.F) {
	for _, s := range []string{"1:0", "4194305:1", "12:34:" + otherBoot, "0:1", "+5:1", "05:1", "1:2:3", "1::", ":", "", "1:2:" + strings.ToUpper(otherBoot)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pid, start, boot, ok := Parse(s)
		if !ok {
			return
		}
		if pid < 1 {
			t.Fatalf("%q parsed to pid %d", s, pid)
		}
		again := strconv.Itoa(pid) + ":" + strconv.FormatUint(start, 10)
		if boot != "" {
			if !host.IsBootID(boot) {
				t.Fatalf("%q parsed to boot %q", s, boot)
			}
			again += ":" + boot
		}
		if again != s {
			t.Fatalf("%q parsed to %d, %d, %q: not its canonical form %q", s, pid, start, boot, again)
		}
	})
}
