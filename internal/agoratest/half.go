package agoratest

import (
	"flag"
	"fmt"
	"os"
)

// HalfEnv names the half of a package's tests a test process runs: "1" the tests whose
// names match the package's split (Halve's first), "2" the rest. make unit runs its longest
// package as both halves at once, in two processes: each half waits on sandboxes and real
// CLIs for much of its time, and run whole the package is the unit step's critical path.
const HalfEnv = "AGORA_TEST_HALF"

// Halve narrows this test process to the half of the package's tests that HalfEnv names,
// split by first (a -test.run pattern): half 1 runs what first matches, half 2 skips it.
// Without HalfEnv it does nothing. A -run or -skip of the caller's own would be silently
// replaced, so that is refused. It is called from TestMain, before m.Run.
func Halve(first string) {
	half := os.Getenv(HalfEnv)
	if half == "" {
		return
	}
	if !flag.Parsed() {
		flag.Parse() // testing's flags are registered before TestMain; m.Run parses only once
	}
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	name, err := halfFlag(half, value("test.run"), value("test.skip"))
	if err == nil {
		err = flag.Set(name, first)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "agoratest: %v\n", err)
		os.Exit(2)
	}
}

// halfFlag is the testing flag that half sets (to the split), given the -run and -skip
// the process already has.
func halfFlag(half, run, skip string) (string, error) {
	name := map[string]string{"1": "test.run", "2": "test.skip"}[half]
	if name == "" {
		return "", fmt.Errorf("%s=%q: want 1 or 2", HalfEnv, half)
	}
	if run != "" || skip != "" {
		return "", fmt.Errorf("%s=%s with -run %q -skip %q: run the package whole (unset %s) or narrow it with -run alone", HalfEnv, half, run, skip, HalfEnv)
	}
	return name, nil
}
