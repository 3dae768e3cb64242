package remote

import (
	"strings"
	"testing"
)

func TestParseRlimits(t *testing.T) {
	r, err := ParseRlimits("fsize=1024,nofile=64,nproc=8")
	if err != nil || r != (Rlimits{Nproc: 8, Fsize: 1024, Nofile: 64}) {
		t.Fatalf("ParseRlimits = %+v, %v", r, err)
	}
	if back, err := ParseRlimits(r.String()); err != nil || back != r {
		t.Errorf("round trip of %q = %+v, %v", r.String(), back, err)
	}
	for _, bad := range []string{
		"", "nproc=8", "nproc=8,fsize=1,nofile=1,nproc=9", "nproc=8,fsize=1,nofile=0",
		"nproc=-1,fsize=1,nofile=1", "nproc=+1,fsize=1,nofile=1", "nproc=08,fsize=1,nofile=1",
		"nproc=8,fsize=1,nofile=1,core=0", "nproc=8,fsize=1,as=1", "nproc=8;fsize=1;nofile=1",
		"nproc=18446744073709551616,fsize=1,nofile=1", "nproc=8,fsize=1,nofile=1,",
		"nproc=8,fsize=1," + strings.Repeat("9", 200),
	} {
		if r, err := ParseRlimits(bad); err == nil {
			t.Errorf("ParseRlimits(%q) = %+v, want an error", bad, r)
		}
	}
	if d := (Rlimits{Fsize: 5}).WithDefaults(); d != (Rlimits{Nproc: DefaultNproc, Fsize: 5, Nofile: DefaultNofile}) {
		t.Errorf("WithDefaults = %+v", d)
	}
}

func FuzzParseRlimits(f *testing.F) {
	f.Add("nproc=256,fsize=1073741824,nofile=4096")
	f.Add("nofile=1,nproc=1,fsize=1")
	f.Add("nproc=8,,fsize=1")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRlimits(s)
		if err != nil {
			return
		}
		if r.Nproc == 0 || r.Fsize == 0 || r.Nofile == 0 {
			t.Fatalf("ParseRlimits(%q) accepted a zero limit: %+v", s, r)
		}
		if back, err := ParseRlimits(r.String()); err != nil || back != r {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}
