package local

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute/host"
)

func TestParseTaskID(t *testing.T) {
	tests := []struct {
		in   string
		want taskID
		ok   bool
	}{
		{in: "local:123:456", want: taskID{pid: 123, start: 456}, ok: true},
		{in: "local:2:0", want: taskID{pid: 2, start: 0}, ok: true},
		{in: "local:1:0"}, // pid 1 is no task's: its group kill would be kill(-1)
		{in: "local:123:18446744073709551615", want: taskID{pid: 123, start: 1<<64 - 1}, ok: true},
		{in: "local:0:1"},
		{in: "local:-1:1"},
		{in: "local:+1:1"},
		{in: "local:01:1"},
		{in: "local:1:01"},
		{in: "local:1"},
		{in: "local:1:2:3"},
		{in: "local:2:2:3:4", want: taskID{pid: 2, start: 2, init: 3, initStart: 4}, ok: true},
		{in: "local:1:2:3:4"},
		{in: "local:2:2:1:4"},
		{in: "local:2:2:0:4"},
		{in: "local:1:2:03:4"},
		{in: "local:1:2:3:"},
		{in: "local:1:2:3:4:5"},
		{in: "local:1:2::4"},
		{in: "local::1"},
		{in: "local:1:"},
		{in: "local:2147483648:1"},
		{in: "docker:1:1"},
		{in: "LOCAL:1:1"},
		{in: "local: 1:1"},
		{in: ""},
		// The current forms: the boot the task started in, last.
		{in: "local:123:456:" + otherBoot, want: taskID{pid: 123, start: 456, boot: otherBoot}, ok: true},
		{in: "local:2:2:3:4:" + otherBoot, want: taskID{pid: 2, start: 2, init: 3, initStart: 4, boot: otherBoot}, ok: true},
		{in: "local:1:2:" + otherBoot},                      // pid 1
		{in: "local:2:2:1:4:" + otherBoot},                  // init 1
		{in: "local:2:2:02:4:" + otherBoot},                 // not canonical
		{in: "local:2:2:" + strings.ToUpper(otherBoot)},     // one spelling only
		{in: "local:2:2:" + otherBoot[:31]},                 // short
		{in: "local:2:2:" + otherBoot + "0"},                // long
		{in: "local:2:2:0123456789abcdef0123456789abcdeg"},  // not hex
		{in: "local:2:2:0123456789-abcdef0123456789abcdef"}, // the kernel's dashes
		{in: "local:2:2:" + otherBoot + ":" + otherBoot},    // two boots
		{in: "local:2:2:3:" + otherBoot},                    // init without its start
		{in: "local:2:2:3:4:" + otherBoot + ":5"},           // a field after the boot
		{in: "local:2:2:3:4:5:" + otherBoot},                // one field too many
		{in: "local:" + otherBoot + ":2:2"},                 // the boot first
		{in: "local:2:2:12345678901234567890123456789012", want: taskID{pid: 2, start: 2, boot: "12345678901234567890123456789012"}, ok: true}, // all digits: a boot still, by place
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTaskID(tt.in)
			if tt.ok != (err == nil) || got != tt.want {
				t.Fatalf("parseTaskID(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadTaskID) {
				t.Errorf("error %v is not ErrBadTaskID", err)
			}
			if err == nil && got.String() != tt.in {
				t.Errorf("round trip: %q -> %q", tt.in, got.String())
			}
		})
	}
}

func TestParseProcStat(t *testing.T) {
	fields := func(comm string) string {
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
		// utime stime cutime cstime priority nice threads itrealvalue starttime vsize ...
		return "4242 (" + comm + ") S 7 4242 4242 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 ..."
	}
	tests := []struct {
		name string
		in   string
		want procStat
		ok   bool
	}{
		{name: "Plain", in: fields("sleep"), want: procStat{ppid: 7, pgrp: 4242, session: 4242, start: 987654}, ok: true},
		{name: "NameWithParensAndSpaces", in: fields("a) S 1 2 3 (b"), want: procStat{ppid: 7, pgrp: 4242, session: 4242, start: 987654}, ok: true},
		{name: "NoParen", in: "4242 sleep S 7"},
		{name: "Short", in: "4242 (x) S 7 4242 4242"},
		{name: "BadStart", in: strings.Replace(fields("x"), "987654", "-5", 1)},
		{name: "Empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tt.in))
			if tt.ok != (err == nil) || got != tt.want {
				t.Errorf("parseProcStat = %+v, %v; want %+v, ok %v", got, err, tt.want, tt.ok)
			}
		})
	}
	t.Run("Self", func(t *testing.T) {
		st, err := readProcStat(os.Getpid())
		if err != nil || st.ppid != os.Getppid() || st.start == 0 {
			t.Errorf("readProcStat(self) = %+v, %v; want ppid %d and a start time", st, err, os.Getppid())
		}
	})
}

// FuzzParseTaskID: the parser never panics, and what it accepts is canonical (it prints
// back exactly as it came in), names no pid below 2, and carries a boot exactly when it has
// the field for one (3 or 5 fields), a well-formed one.
func FuzzParseTaskID(f *testing.F) {
	for _, s := range []string{"local:123:456", "local:1:0", "local:01:1", "local:1:2:3", "local:1:2:3:4", "local:1:2:0:4", "docker:x", "",
		"local:2:3:" + otherBoot, "local:2:3:4:5:" + otherBoot, "local:2:3:4:" + otherBoot, "local:2:3:4:5:" + otherBoot + ":6"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseTaskID(s)
		if err != nil {
			if !errors.Is(err, ErrBadTaskID) {
				t.Fatalf("parseTaskID(%q) = %v, not ErrBadTaskID", s, err)
			}
			return
		}
		colons := strings.Count(s, ":")
		if id.String() != s || id.pid < 2 || id.init < 0 || id.init == 1 ||
			(colons >= 4) != (id.init > 0) || (colons%2 == 1) != (id.boot != "") ||
			(id.boot != "" && !host.IsBootID(id.boot)) {
			t.Fatalf("parseTaskID(%q) = %+v, prints %q", s, id, id.String())
		}
		// Round trip: the printed id parses to the same id.
		if again, err := parseTaskID(id.String()); err != nil || again != id {
			t.Fatalf("parseTaskID(%q) = %+v, %v; want %+v", id.String(), again, err, id)
		}
	})
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (sleep) S 7 4242 4242 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000"))
	f.Add([]byte("1 ((x) ) R 0 0 0"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseProcStat(b)
		if err != nil {
			return
		}
		// Whatever parses came from the text after the last ')'.
		tail := string(b[strings.LastIndexByte(string(b), ')')+1:])
		if !strings.Contains(tail, strconv.FormatUint(st.start, 10)) {
			t.Fatalf("start %d not in %q", st.start, tail)
		}
	})
}
