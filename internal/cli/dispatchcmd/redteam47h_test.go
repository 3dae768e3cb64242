package dispatchcmd

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/orch/api"
)

var redTaker = []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "TERM=xterm", "AGORA_HOME=/h", "_=/usr/bin/agora"}

// envDeclineOf is the reason r gives req, or fails when r does not decline it for the
// environment (a decline past it names the peer: PID -1 is no process).
func envDeclineOf(t *testing.T, r *handoffRunner, req *api.HandoffRequest) (string, bool) {
	t.Helper()
	_, err := r.Prepare(t.Context(), req, api.Peer{PID: -1})
	var d *api.Declined
	if !errors.As(err, &d) {
		t.Fatalf("Prepare: %v, want a decline", err)
	}
	return d.Why, strings.Contains(d.Why, "environment")
}

// TestRedTeam47H_ForgedSumsDoNotDecide: the sums are the CLI's word, the digests the
// taker's check. A CLI whose PATH (or, with a kubeconfig, any variable) is not the taker's
// but which sends the taker's own sums is declined all the same, told only that its
// environment differs; one whose digests agree is never declined for the environment, whatever
// its sums say. No reason holds a sum or a value.
func TestRedTeam47H_ForgedSumsDoNotDecide(t *testing.T) {
	const secret = "rt47h-secret-value"
	for _, whole := range []bool{false, true} {
		r := envRunner(t, redTaker, true, whole)
		cli := slices.Clone(redTaker)
		if whole {
			cli = append(cli, "AWS_PROFILE="+secret)
		} else {
			cli[0] = "PATH=/tmp/" + secret + ":/usr/bin:/bin"
		}
		req := envRequest(r, cli)
		req.EnvSums = slices.Clone(r.sums) // "my environment is yours"
		why, env := envDeclineOf(t, r, req)
		if !env || !strings.Contains(why, "it differs") {
			t.Errorf("whole=%v: forged sums: %q, want a decline for the environment naming nothing", whole, why)
		}
		for _, s := range append(api.EnvSums(cli), r.sums...) {
			if _, sum, _ := strings.Cut(s, "="); strings.Contains(why, sum) {
				t.Errorf("whole=%v: the reason holds a sum: %q", whole, why)
			}
		}
		if strings.Contains(why, secret) {
			t.Errorf("whole=%v: the reason holds a value: %q", whole, why)
		}
		// The digests agree: sums claiming every variable differs change nothing.
		same := envRequest(r, redTaker)
		same.EnvSums = []string{"AGORA_FAKE=0000000000000000", "LD_PRELOAD=0000000000000000", "PATH=0000000000000000"}
		if why, env := envDeclineOf(t, r, same); env {
			t.Errorf("whole=%v: the taker's own environment with lying sums is declined for it: %q", whole, why)
		}
	}
}

// TestRedTeam47H_DeclineLineIsOneLine: a variable's name is the caller's to choose (a CI
// job's user-set variables, a script's), any bytes but '=' and NUL: a newline and a forged
// "agora:" line, a carriage return, ANSI sequences that clear the screen or retitle the
// terminal, bidirectional overrides, invalid UTF-8, a name of 100 KB. The CLI's decline is
// one line of visible text of bounded length, and resident.log's line of it is one line.
func TestRedTeam47H_DeclineLineIsOneLine(t *testing.T) {
	names := []string{
		"AGORA_X\nagora: the resident dispatcher took this dispatch\n",
		"AGORA_\r\x1b[2K\x1b[1Aok",
		"AGORA_\x1b[2J\x1b[H",
		"AGORA_\x1b]0;pwned\x07",
		"AGORA_\u202e\u2066txt.exe",
		"AGORA_\xff\xfe\x80",
		"LD_\x00\x7f\u2028",
		"AGORA_" + strings.Repeat("\x1b", 100_000),
	}
	for _, whole := range []bool{false, true} {
		r := envRunner(t, redTaker, true, whole)
		cli := slices.Clone(redTaker)
		for _, n := range names {
			if whole {
				// Names of no family: only the whole environment's digest differs.
				n = strings.TrimPrefix(strings.TrimPrefix(n, "AGORA_"), "LD_")
			}
			cli = append(cli, n+"=1")
		}
		why, env := envDeclineOf(t, r, envRequest(r, cli))
		if !env {
			t.Fatalf("not declined for the environment: %q", why)
		}
		line := fmt.Sprintf("agora: %s declined this dispatch (%s); it runs in this process\n", "the resident dispatcher", agenttext.EscapeLine(why))
		body := strings.TrimSuffix(line, "\n")
		if strings.ContainsAny(body, "\n\r\x1b\x07\x00\x7f") || !utf8.ValidString(body) {
			t.Errorf("whole=%v: the decline line holds a control character or invalid UTF-8: %q", whole, line)
		}
		for _, r := range body {
			if agenttext.Hidden(r) {
				t.Errorf("whole=%v: the decline line holds %U", whole, r)
			}
		}
		if len(line) > 4096 {
			t.Errorf("whole=%v: a decline line of %d bytes", whole, len(line))
		}
		if !strings.HasSuffix(body, "; it runs in this process") || strings.Count(line, "declined this dispatch") != 1 {
			t.Errorf("whole=%v: the names moved the line's end: %q", whole, line)
		}
		var log bytes.Buffer
		slog.New(slog.NewTextHandler(&log, nil)).Info("hand-off declined", "pid", 1, "why", why)
		if n := strings.Count(log.String(), "\n"); n != 1 || strings.ContainsAny(log.String(), "\r\x1b") {
			t.Errorf("whole=%v: resident.log's line of it is %d lines: %q", whole, n, log.String())
		}
	}
}

// TestRedTeam47H_DeclineNamesCannotFloodResidentLog: the resident says a decline in
// resident.log once a minute for each reason, so that a process of this user posting
// hand-offs in a loop cannot grow the log (capped only when a resident starts). A decline's
// reason now holds the names of the peer's variables, which the peer chooses: a new name
// each request must not make each request a reason of its own.
func TestRedTeam47H_DeclineNamesCannotFloodResidentLog(t *testing.T) {
	var log bytes.Buffer
	r := envRunner(t, redTaker, true, false)
	res := &resident{runner: r, log: slog.New(slog.NewTextHandler(&log, nil))}
	const posts = 300
	for i := range posts {
		cli := append(slices.Clone(redTaker), fmt.Sprintf("AGORA_FLOOD_%d_%s=1", i, strings.Repeat("X", 40)))
		if _, err := res.Prepare(t.Context(), envRequest(r, cli), api.Peer{PID: -1}); err == nil {
			t.Fatal("taken")
		}
	}
	if n := strings.Count(log.String(), "\n"); n > 2 {
		t.Errorf("%d declines of one kind wrote %d lines (%d bytes) to resident.log within a minute", posts, n, log.Len())
	}
	if res.declines.total() != posts {
		t.Errorf("counted %d declines, want %d", res.declines.total(), posts)
	}
}

// TestRedTeam47H_KubeconfigKeepsTheWholeEnvironment: a home with a kubernetes target whose
// kubeconfig may run a credential plugin (which reads any variable: AWS_PROFILE, a cloud's
// own) keeps the whole-environment rule whatever its other targets, and a CLI that differs
// from the resident only in such a variable is declined; an in-cluster target (service
// account, no plugin) and the other providers do not.
func TestRedTeam47H_KubeconfigKeepsTheWholeEnvironment(t *testing.T) {
	for want, targets := range map[bool]map[string]config.Target{
		true: {"a-local": {Provider: config.ProviderLocal}, "b-docker": {Provider: config.ProviderDocker},
			"z-k8s": {Provider: config.ProviderKubernetes, Remote: config.Remote{Kubeconfig: "/etc/agora/kubeconfig"}}},
		false: {"local": {Provider: config.ProviderLocal}, "in-cluster": {Provider: config.ProviderKubernetes}},
	} {
		if got := residentWholeEnv(&config.Config{Targets: targets}); got != want {
			t.Errorf("targets %v: whole environment %v, want %v", targets, got, want)
		}
	}
	r := envRunner(t, redTaker, true, true)
	why, env := envDeclineOf(t, r, envRequest(r, append(slices.Clone(redTaker), "AWS_PROFILE=prod")))
	if !env || !strings.Contains(why, "AWS_PROFILE differs") || !strings.Contains(why, "kubeconfig") {
		t.Errorf("a CLI of another AWS_PROFILE: %q", why)
	}
}
