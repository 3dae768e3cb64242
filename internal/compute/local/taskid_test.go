package local

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
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

func FuzzParseTaskID(f *testing.F) {
	for _, s := range []string{"local:123:456", "local:1:0", "local:01:1", "local:1:2:3", "local:1:2:3:4", "local:1:2:0:4", "docker:x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseTaskID(s)
		if err != nil {
			return
		}
		// Canonical: a parsed id prints back exactly as it came in.
		if id.String() != s || id.pid < 1 || id.init < 0 || (strings.Count(s, ":") == 4) != (id.init > 0) {
			t.Fatalf("parseTaskID(%q) = %+v, prints %q", s, id, id.String())
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
