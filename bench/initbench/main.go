// Command initbench measures what an agora process spends before its own work starts.
//
// For each binary it runs `agora version` and `agora --help` (and `agora-worker --help` with
// -worker) with the runtime's init trace on (GODEBUG=inittrace=1) and sums every package's
// init clock time per run: the target is at most 5 ms for every agora process. -base
// (and -base-worker) name earlier builds measured in the same rounds, interleaved, so a change
// is read against what it replaces under the same load.
//
// With -handoff it also times the one-shot CLI's start: each binary gets a home of its own
// with a no-op subagent and an `agora orch serve`, and every round runs `agora dispatch run`
// under `strace --seccomp-bpf -e trace=execve,connect` (only those two calls stop the
// process): the time from the CLI's execve to its connect to serve's orch.sock is Go's start,
// every package init and the CLI up to the hand-off.
//
//	go build -o /tmp/ib ./bench/initbench
//	nice -n -20 /tmp/ib -runs 30 -bin bin/agora -worker bin/agora-worker \
//	    -base /tmp/base/agora -base-worker /tmp/base/agora-worker -handoff
//
// It prints, per binary and command, the minimum, median and p90 of the summed init time,
// the packages with init work and the bytes they allocate, the init time by origin (module:
// the standard library, agora itself, each dependency; the sum of each package's median) and
// the packages with the largest median init time (with their bytes, which unlike time do not
// vary from run to run).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	runs := flag.Int("runs", 30, "rounds: runs of each command per binary")
	bin := flag.String("bin", "bin/agora", "the agora binary")
	worker := flag.String("worker", "", "the agora-worker binary (optional)")
	base := flag.String("base", "", "another agora binary to measure in the same rounds")
	baseWorker := flag.String("base-worker", "", "another agora-worker binary to measure in the same rounds")
	handoff := flag.Bool("handoff", false, "also time a handed-off `agora dispatch run` from execve to its connect to orch.sock (needs strace)")
	top := flag.Int("top", 10, "packages to list by median init time")
	origins := flag.Int("origins", 12, "origins (modules) to list by summed init time")
	flag.Parse()
	subjects := []*subject{{bin: *bin, args: []string{"version"}}, {bin: *bin, args: []string{"--help"}}}
	if *worker != "" {
		subjects = append(subjects, &subject{bin: *worker, args: []string{"--help"}})
	}
	if *base != "" {
		subjects = append(subjects, &subject{bin: *base, args: []string{"version"}}, &subject{bin: *base, args: []string{"--help"}})
	}
	if *baseWorker != "" {
		subjects = append(subjects, &subject{bin: *baseWorker, args: []string{"--help"}})
	}
	var homes []*home
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "initbench:", err)
		for _, h := range homes {
			h.close()
		}
		os.Exit(1)
	}
	if *handoff {
		for _, b := range []string{*bin, *base} {
			if b == "" {
				continue
			}
			h, err := newHome(b)
			if err != nil {
				fail(err)
			}
			homes = append(homes, h)
		}
	}
	if err := run(subjects, homes, *runs); err != nil {
		fail(err)
	}
	for _, h := range homes {
		h.close()
	}
	for _, s := range subjects {
		s.report(*top, *origins)
	}
	for _, h := range homes {
		fmt.Printf("%s dispatch run, handed off: execve -> connect(orch.sock) %s (%d runs)\n", h.bin, summary(h.connects), len(h.connects))
	}
}

// run measures every subject and home once per round; the order rotates each round so no
// binary always goes first.
func run(subjects []*subject, homes []*home, runs int) error {
	for r := 0; r < runs; r++ {
		for i := range subjects {
			s := subjects[(i+r)%len(subjects)]
			if err := s.measure(); err != nil {
				return err
			}
		}
		for i := range homes {
			if err := homes[(i+r)%len(homes)].measure(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *subject) name() string { return s.bin + " " + strings.Join(s.args, " ") }
