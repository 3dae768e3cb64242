// Package callerctx decides whether a process that hands its work to another (the CLI to
// `agora orch serve` or to the resident dispatcher) could have done that work itself: a
// hand-off must never widen what its caller may do. Two checks, both needed:
//
//   - [Read] compares what /proc shows of a process's security context besides its ids:
//     capabilities, no_new_privs, seccomp and the LSM label. They must be the taker's own.
//   - A [Prover] challenge covers what /proc does not show (a Landlock domain) and what an
//     LSM decides: the caller must read a secret that only a process the kernel lets inspect
//     the taker can read.
//
// The resident dispatcher, which stands in for the CLI that started it, also holds a peer to
// its own [Process] ([ReadProcess]: umask, ids and groups, cgroup, limits, namespaces): what a
// dispatch runs with besides its environment.
//
// The CLI side (cmd/agora, the lean front) uses [Answer]: the package imports only the
// standard library and x/sys.
package callerctx

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// Security is what /proc shows of a process's security context that decides what it may do
// besides its user and groups: its five capability sets, no_new_privs, its seccomp mode and
// number of filters, and its LSM labels (SELinux's or Smack's in attr/current, AppArmor's in
// attr/apparmor/current). A field the kernel does not show (an older kernel's) is "" on
// both sides of a comparison.
type Security struct {
	CapInh, CapPrm, CapEff, CapBnd, CapAmb string
	NoNewPrivs, Seccomp, SeccompFilters    string
	LSM, AppArmor                          string
}

// statusFields are the /proc/PID/status lines Read keeps, and where.
var statusFields = []struct {
	key string
	at  func(*Security) *string
}{
	{"CapInh", func(s *Security) *string { return &s.CapInh }},
	{"CapPrm", func(s *Security) *string { return &s.CapPrm }},
	{"CapEff", func(s *Security) *string { return &s.CapEff }},
	{"CapBnd", func(s *Security) *string { return &s.CapBnd }},
	{"CapAmb", func(s *Security) *string { return &s.CapAmb }},
	{"NoNewPrivs", func(s *Security) *string { return &s.NoNewPrivs }},
	{"Seccomp", func(s *Security) *string { return &s.Seccomp }},
	{"Seccomp_filters", func(s *Security) *string { return &s.SeccompFilters }},
}

// Read returns the security context of process pid (0: this process). A process that is
// gone, or whose status or labels cannot be read, is an error: the caller declines.
func Read(pid int) (Security, error) {
	proc := "/proc/self"
	if pid > 0 {
		proc = "/proc/" + strconv.Itoa(pid)
	}
	var s Security
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		return s, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte{':'})
		if !ok {
			continue
		}
		for _, f := range statusFields {
			if string(k) == f.key {
				*f.at(&s) = string(bytes.TrimSpace(v))
			}
		}
	}
	if s.CapEff == "" || s.NoNewPrivs == "" {
		return s, fmt.Errorf("%s/status shows no capabilities or no_new_privs", proc)
	}
	if s.LSM, err = label(proc + "/attr/current"); err != nil {
		return s, err
	}
	if s.AppArmor, err = label(proc + "/attr/apparmor/current"); err != nil {
		return s, err
	}
	return s, nil
}

// label reads an LSM's label file: "" where no LSM provides it (no file, or EINVAL from a
// kernel whose attr files no module backs).
func label(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EINVAL):
		return "", nil
	case err != nil:
		return "", err
	}
	return string(bytes.TrimRight(b, "\x00\n")), nil
}

// Differs names the first way in which s (the caller's) is not taker (the process that would
// run the caller's work), or "" when they are the same. Equality, not a subset: a caller with
// more than the taker would lose by the hand-off, and one with less would gain; neither is
// proven harmless, so both run their own work. Seccomp is proven equal only without filters
// on either side.
func (s Security) Differs(taker Security) string {
	pairs := []struct{ what, c, t string }{
		{"inheritable capabilities (CapInh)", s.CapInh, taker.CapInh},
		{"permitted capabilities (CapPrm)", s.CapPrm, taker.CapPrm},
		{"effective capabilities (CapEff)", s.CapEff, taker.CapEff},
		{"capability bounding set (CapBnd)", s.CapBnd, taker.CapBnd},
		{"ambient capabilities (CapAmb)", s.CapAmb, taker.CapAmb},
		{"no_new_privs", s.NoNewPrivs, taker.NoNewPrivs},
		{"seccomp mode", s.Seccomp, taker.Seccomp},
		{"seccomp filters", s.SeccompFilters, taker.SeccompFilters},
		{"LSM label", s.LSM, taker.LSM},
		{"AppArmor profile", s.AppArmor, taker.AppArmor},
	}
	for _, p := range pairs {
		if p.c != p.t {
			return fmt.Sprintf("%s: the CLI has %q, this dispatcher %q", p.what, p.c, p.t)
		}
	}
	// /proc shows a seccomp filter's mode and count, never its program: two processes with
	// one filter each may allow different system calls, and no check here can tell. Only the
	// absence of filters is proven equal.
	if (s.Seccomp != "0" && s.Seccomp != "") || (s.SeccompFilters != "0" && s.SeccompFilters != "") {
		return fmt.Sprintf("seccomp: the CLI and this dispatcher run under seccomp filters (mode %q, %q filters) whose programs cannot be compared", s.Seccomp, s.SeccompFilters)
	}
	return ""
}
