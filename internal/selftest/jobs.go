package selftest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultJobs is how many attacks run at once when [Options.Jobs] is 0. An attack mostly
// waits (a sandbox starting and ending, a refused connection, a time limit), so a 2-core host
// keeps more than two busy; past this the dispatches' own CPU (an agora process, bubblewrap,
// the worker, git) is what they wait for (docs/selftest.md, "Wall time").
const DefaultJobs = 6

// MaxJobs caps [Options.Jobs]: each attack at once holds a dispatch's sandbox, its disk quota
// (memory, on a tmpfs) and an agora process.
const MaxJobs = 32

// each calls f with the index of every attack, o.Jobs at a time, the slowest first, and
// returns when every call has returned; after ctx ends no new call starts.
func (r *run) each(ctx context.Context, f func(i int)) {
	jobs := r.o.Jobs
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	jobs = min(jobs, MaxJobs, max(len(r.o.Attacks), 1))
	next := make(chan int)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for _, i := range startOrder(r.o.Attacks) {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}

// startOrder is the order the attacks start in: those that wait for a limit (a time limit,
// the disk quota) first, then the others in corpus order, so the longest do not start last
// and hold the run's end alone.
func startOrder(attacks []Attack) []int {
	order := make([]int, len(attacks))
	for i := range order {
		order[i] = i
	}
	slow := func(a Attack) bool { return a.Timeout > 0 || a.Needs != "" }
	slices.SortStableFunc(order, func(i, j int) int {
		switch si, sj := slow(attacks[i]), slow(attacks[j]); {
		case si && !sj:
			return -1
		case sj && !si:
			return 1
		}
		return 0
	})
	return order
}

// one runs attack i on probes of its own and returns its row.
func (r *run) one(ctx context.Context, i int) Row {
	a := r.o.Attacks[i]
	start := time.Now()
	ar, err := r.forAttack(i)
	var row Row
	if err != nil {
		row = Row{ID: a.ID, Class: a.Class, Expected: a.Expect, Control: a.Control, Seen: NotRun,
			Evidence: "set up the attack's host probes: " + err.Error()}
	} else {
		row = ar.attack(ctx, a)
		ar.listener.close()
	}
	if note := r.unseen(a); note != "" && row.Seen == Blocked {
		row.Evidence = note + ": " + row.Evidence
	}
	row.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
	return row
}

// forAttack is r for attack i alone: a probe directory (the secret, the drop directory) and
// a loopback listener of its own, so a connection or a planted file counts against the
// attack that made it, nonce or not, while others run.
func (r *run) forAttack(i int) (*run, error) {
	ar := *r
	ar.probe = filepath.Join(r.work, "probe", strconv.Itoa(i))
	if err := writeProbe(ar.probe, r.secret); err != nil {
		return nil, fmt.Errorf("write the host probe: %w", err)
	}
	// Traversable by anyone, as the probe is: only the sandbox keeps a sandboxed uid out.
	if err := os.Chmod(filepath.Dir(ar.probe), 0o755); err != nil {
		return nil, err
	}
	l, err := listen()
	if err != nil {
		return nil, fmt.Errorf("listen on the host's loopback: %w", err)
	}
	ar.listener = l
	return &ar, nil
}

// hostPaths are the values of an attack that are paths on agora's host, by the name the
// program reads them as.
var hostPaths = []string{"$home", "$probe", "$worker"}

// unseen says which host paths attack a aims at that a sandbox of this target's provider
// does not have at all (a container's or a pod's filesystem is its image's, not the host's):
// blocked there says that the path is absent, not that a bind or a permission held. ""
// on bubblewrap, whose sandbox binds the host's system directories.
func (r *run) unseen(a Attack) string {
	if r.o.Provider == "" || r.o.Provider == "local" {
		return ""
	}
	var named []string
	for _, v := range hostPaths {
		if strings.Contains(string(a.Program), v) {
			named = append(named, v)
		}
	}
	if len(named) == 0 {
		return ""
	}
	if len(named) == 1 {
		return fmt.Sprintf("%s is a host path a %s sandbox does not have at all", named[0], r.o.Provider)
	}
	return fmt.Sprintf("%s are host paths a %s sandbox does not have at all", strings.Join(named, " and "), r.o.Provider)
}
