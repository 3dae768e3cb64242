package remote

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// RlimitsEnv carries, in the worker's container, the rlimits the worker sets on itself
// before anything of the agent runs: "nproc=N,fsize=N,nofile=N" (RLIMIT_CORE is always 0).
// A pod has no setting for them (the local provider applies them with prlimit, the container
// provider as ulimits), and lowering a limit needs no privilege. RLIMIT_NPROC binds per
// dispatch only because each dispatch's pod runs as its own uid.
const RlimitsEnv = "AGORA_RLIMITS"

// Defaults for a zero field: the local provider's.
const (
	DefaultNproc  = 256
	DefaultFsize  = 1 << 30
	DefaultNofile = 4096
)

// maxRlimitsEnv bounds the variable's length: three names and three 20-digit numbers.
const maxRlimitsEnv = 128

// Rlimits are the limits the worker in a pod applies, soft and hard alike.
type Rlimits struct {
	Nproc, Fsize, Nofile uint64
}

// WithDefaults fills each zero field with its default.
func (r Rlimits) WithDefaults() Rlimits {
	r.Nproc = cmp.Or(r.Nproc, DefaultNproc)
	r.Fsize = cmp.Or(r.Fsize, DefaultFsize)
	r.Nofile = cmp.Or(r.Nofile, DefaultNofile)
	return r
}

// String is the [RlimitsEnv] form.
func (r Rlimits) String() string {
	return fmt.Sprintf("nproc=%d,fsize=%d,nofile=%d", r.Nproc, r.Fsize, r.Nofile)
}

// ParseRlimits reads the [RlimitsEnv] form: each of nproc, fsize and nofile exactly once, in
// any order, as positive decimal numbers. Anything else is refused: a limit the worker
// misread would be a limit not applied.
func ParseRlimits(s string) (Rlimits, error) {
	var r Rlimits
	if len(s) > maxRlimitsEnv {
		return r, fmt.Errorf("%s is %d bytes, over %d", RlimitsEnv, len(s), maxRlimitsEnv)
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(kv, "=")
		var dst *uint64
		switch name {
		case "nproc":
			dst = &r.Nproc
		case "fsize":
			dst = &r.Fsize
		case "nofile":
			dst = &r.Nofile
		}
		if !ok || dst == nil || seen[name] {
			return Rlimits{}, fmt.Errorf("%s %q: want nproc=N,fsize=N,nofile=N, each once", RlimitsEnv, s)
		}
		seen[name] = true
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil || n == 0 || val[0] == '+' || val[0] == '0' {
			return Rlimits{}, fmt.Errorf("%s: %s=%q is not a positive decimal number", RlimitsEnv, name, val)
		}
		*dst = n
	}
	if len(seen) != 3 {
		return Rlimits{}, errors.New(RlimitsEnv + ": want nproc, fsize and nofile")
	}
	return r, nil
}
