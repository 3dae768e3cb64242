package selftest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// seen is what the runner gathered about one dispatch.
type seen struct {
	rec            record
	canary, report []byte
	patch          []byte
	outputs        string
	// logs is the dispatch's standard output as agora stored it.
	logs []byte
	// probe is what the host-side probe saw ("" when it saw nothing).
	probe string
	// host is what the observations of fixtures.go need.
	host hostSeen
	// final is the dispatch's vouched final answer (ObserveReview only); nil for none.
	final []byte
	// logSize is the size of the standard output the host kept (ObserveLogs only); -1 when
	// it could not be read.
	logSize int64
}

// diskFix is agora doctor's fix for its disk-quota row.
const diskFix = "agora doctor's disk-quota row: run agora as root (or give it CAP_SYS_ADMIN) to enforce targets.<name>.disk"

// podDiskFix is what bounds a kubernetes target's disk: nothing agora enforces at once. The
// pod's workspace is an emptyDir the kubelet evicts past its size limit when it next looks,
// not a quota that refuses the write, so the record says disk-unenforced.
const podDiskFix = "none in agora: bound the pods' ephemeral storage with a LimitRange or the kubelet's eviction thresholds (docs/providers-k8s.md)"

// fix is what makes a not-enforced row enforceable on this run's provider.
func (r *run) fix() string {
	if r.o.Provider == "kubernetes" {
		return podDiskFix
	}
	return diskFix
}

// attack dispatches a and decides its row.
func (r *run) attack(ctx context.Context, a Attack) Row {
	row := Row{ID: a.ID, Class: a.Class, Expected: a.Expect, Control: a.Control}
	var late string
	var err error
	allowances := r.startAllowances(a)
	for i, allowance := range allowances {
		var nonce string
		if nonce, err = randomHex(); err != nil {
			break
		}
		r.listener.reset()
		var s seen
		if s, err = r.dispatch(ctx, a, nonce, allowance); err != nil {
			break
		}
		s.probe = r.probeAfter(a, nonce)
		if a.Observe == ObserveLogs {
			s.logSize = r.logSize(ctx, s.rec.ID)
		}
		row.Dispatch = s.rec.ID
		row.Seen, row.Evidence = r.decide(a, nonce, s)
		if i == len(allowances)-1 || !startedLate(a, nonce, s) {
			break
		}
		late = fmt.Sprintf("run again: %s did not start the program within its time limit; run again with %s more for the start: ", s.rec.ID, allowances[i+1])
	}
	if late != "" && err == nil {
		row.Evidence = late + row.Evidence
	}
	if err != nil {
		row.Seen, row.Evidence = NotRun, err.Error()
	}
	if row.Seen == NotEnforced {
		row.Fix = r.fix()
	}
	row.Pass = row.Seen == a.Expect
	return row
}

// probeAfter reads the host-side probe the attack's observation names.
func (r *run) probeAfter(a Attack, nonce string) string {
	switch a.Observe {
	case ObserveListener:
		if any, withNonce := r.listener.saw(nonce); any {
			return fmt.Sprintf("the host's loopback listener was reached (the run's nonce in the request: %v)", withNonce)
		}
	case ObserveDropfile:
		drop := filepath.Join(r.probe, "drop")
		// A program that replaced the directory (a symlink to a directory of the person's)
		// crossed the boundary already; the runner removes nothing through it.
		if fi, err := os.Lstat(drop); err != nil || !fi.IsDir() {
			return "the host directory " + drop + " was replaced or removed"
		}
		if ents, _ := os.ReadDir(drop); len(ents) > 0 {
			for _, e := range ents {
				os.Remove(filepath.Join(r.probe, "drop", e.Name()))
			}
			return "a file appeared in the host directory: " + ents[0].Name()
		}
	case ObserveProcess:
		if pids := killMarked("agora-selftest-" + nonce); len(pids) > 0 {
			return fmt.Sprintf("host processes %v outlived the dispatch (killed now)", pids)
		}
	}
	return ""
}

// decide turns what was gathered into the row's seen and evidence. A program that left no
// canary of this run did not run: never blocked.
func (r *run) decide(a Attack, nonce string, s seen) (string, string) {
	rec := fmt.Sprintf("%s %s %s, isolation %s", s.rec.ID, s.rec.State, s.rec.Reason, s.rec.Isolation)
	if strings.TrimSpace(string(s.canary)) != nonce && !markedEntry(a, s, nonce) {
		return NotRun, "no canary: the program did not run (" + rec + ": " + s.rec.Detail + ")"
	}
	if a.Needs != "" && !hasIsolation(s.rec.Isolation, a.Needs) {
		return NotEnforced, "the record's isolation lacks " + a.Needs + " (" + rec + ")"
	}
	status, said, _ := strings.Cut(strings.TrimSpace(string(s.report)), "\t")
	if status == "missing" {
		return NotRun, said
	}
	switch a.Observe {
	case ObserveReport:
		switch status {
		case "done":
			return Allowed, "the program did it: " + said
		case "refused":
			return Blocked, "refused: " + said + " (" + rec + ")"
		}
		return NotRun, "the program left no report (" + rec + ": " + s.rec.Detail + ")"
	case ObserveSecret:
		if strings.Contains(said, r.secret) {
			return Allowed, "the program read the host's secret"
		}
		// The report is clipped and is the program's word: the secret anywhere the dispatch
		// carried it out (its log, an output) is the same breach.
		if where := carries(s, r.secret); where != "" {
			return Allowed, "the host's secret is in the dispatch's " + where
		}
		return Blocked, "the host's secret never reached the program: " + clip(said, 120)
	case ObserveListener, ObserveDropfile, ObserveProcess:
		if s.probe != "" {
			return Allowed, s.probe
		}
		if status == "" {
			// The probe is as quiet when the program stopped before its attack.
			return NotRun, "the host-side probe saw nothing, but the program left no report: nothing shows it made its attack (" + rec + ")"
		}
		return Blocked, "the host-side probe saw nothing (" + rec + ")"
	case ObserveReason:
		if s.rec.State == lifecycle.DispatchFailed && s.rec.Reason == a.Arg {
			return Blocked, "agora ended it: " + rec
		}
		return Allowed, "the dispatch did not end " + a.Arg + ": " + rec
	case ObserveState:
		if s.rec.State == a.Arg {
			return Allowed, "the dispatch ended " + a.Arg
		}
		return Blocked, "the dispatch ended " + rec
	case ObservePatch:
		if patchNames(s.patch, a.Arg) {
			return Allowed, "the patch names " + a.Arg
		}
		if len(bytes.TrimSpace(s.patch)) == 0 {
			return NotRun, "the patch is empty: nothing shows it was captured (" + rec + ")"
		}
		return Blocked, "the patch does not name " + a.Arg + " (it names what else the program wrote)"
	case ObserveOutput:
		if _, err := os.Stat(filepath.Join(s.outputs, a.Arg)); s.outputs != "" && err == nil {
			return Allowed, "the outputs hold " + a.Arg
		}
		if status == "" {
			return NotRun, "the outputs lack " + a.Arg + ", but the program left no report: nothing shows it made its attack (" + rec + ")"
		}
		return Blocked, "the outputs lack " + a.Arg
	case ObserveLogs:
		limit, _ := logsLimit(a.Arg) // Load checked it
		switch {
		case s.logSize < 0:
			return NotRun, "the dispatch's logs could not be read (" + rec + ")"
		case s.logSize > limit:
			return Allowed, fmt.Sprintf("the host kept %d bytes of standard output, more than %s", s.logSize, a.Arg)
		case status != "done":
			// A program that stopped before its flood proves nothing about the cap.
			return NotRun, "the program did not report its output written (" + rec + ")"
		}
		return Blocked, fmt.Sprintf("the host kept %d bytes of standard output, at most %s: %s", s.logSize, a.Arg, said)
	case ObserveReview:
		return decideReview(s.final, s, nonce, status, said)
	}
	return r.decideHost(a, nonce, s, status, said)
}

// markedEntry reports whether a counts the dispatch's audit entries and one holds the run's
// mark: only the program makes the mark, so the entry shows it ran where the canary cannot
// (the audit budget that ends the dispatch limit-exceeded, which is the control, keeps its
// outputs and log too).
func markedEntry(a Attack, s seen, nonce string) bool {
	if a.Observe != ObserveEntries {
		return false
	}
	for _, e := range s.host.entries {
		if b, _ := json.Marshal(e); bytes.Contains(b, []byte(mark(nonce))) {
			return true
		}
	}
	return false
}

// carries names the product of s that holds secret (its log, an output, its patch), or "".
func carries(s seen, secret string) string {
	if secret == "" {
		return ""
	}
	if bytes.Contains(s.logs, []byte(secret)) {
		return "log"
	}
	if bytes.Contains(s.patch, []byte(secret)) {
		return "patch"
	}
	found := ""
	if s.outputs != "" {
		filepath.WalkDir(s.outputs, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || found != "" {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
				rel, _ := filepath.Rel(s.outputs, p)
				found = "output " + rel
			}
			return nil
		})
	}
	return found
}

// logSize is the size of the standard output the host kept for dispatch id, -1 when it
// cannot be read.
func (r *run) logSize(ctx context.Context, id string) int64 {
	b, err := r.agora(ctx, "dispatch", "logs", id)
	if err != nil {
		return -1
	}
	return int64(len(b))
}

// logsLimit reads an ObserveLogs argument: a whole number of MiB ("5MiB").
func logsLimit(arg string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSuffix(arg, "MiB"), 10, 64)
	if err != nil || n <= 0 || !strings.HasSuffix(arg, "MiB") {
		return 0, fmt.Errorf("%q: want a size in MiB, such as 5MiB", arg)
	}
	return n << 20, nil
}

// patchNames reports whether a diff --git header of patch names a path starting with p.
func patchNames(patch []byte, p string) bool {
	for _, l := range bytes.Split(patch, []byte("\n")) {
		if bytes.HasPrefix(l, []byte("diff --git ")) && (bytes.Contains(l, []byte(" a/"+p)) || bytes.Contains(l, []byte(" b/"+p))) {
			return true
		}
	}
	return false
}

func hasIsolation(isolation, want string) bool {
	for _, t := range strings.Split(isolation, "+") {
		if t == want {
			return true
		}
	}
	return false
}

// killMarked kills the host processes whose command line holds mark, and the groups they
// lead, and returns their pids.
func killMarked(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(mark)) {
			continue
		}
		pids = append(pids, pid)
		// A marked process that leads its own group (setsid) takes the group with it: its
		// children (the sleep a shell forked) carry no mark and would outlive it.
		if pg, err := syscall.Getpgid(pid); err == nil && pg == pid {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return pids
}
