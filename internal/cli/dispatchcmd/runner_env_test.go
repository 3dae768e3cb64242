package dispatchcmd

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// envRunner is a taker whose home, binary and environment are takerEnv's; the checks before
// the environment's pass for a request of envRequest.
func envRunner(t *testing.T, takerEnv []string, resident, whole bool) *handoffRunner {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	running, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	r := &handoffRunner{home: "/h", exe: exe, running: running, env: api.EnvDigest(takerEnv), sums: api.EnvSums(takerEnv), resident: resident}
	if whole {
		r.envAll = api.ResidentEnvDigest(takerEnv)
	}
	return r
}

// envRequest is a CLI's request from env, to a taker of envRunner.
func envRequest(r *handoffRunner, env []string) *api.HandoffRequest {
	return &api.HandoffRequest{Home: "/h", Exe: r.exe, Env: api.EnvDigest(env), EnvAll: api.ResidentEnvDigest(env), EnvSums: api.EnvSums(env), Subagent: "s"}
}

// TestHandoffRunner_EnvDeclineNamesVariables: a taker declines a CLI whose variables that a
// dispatch reads are not its own, and its reason (which the CLI prints) names each of them,
// never a value, and says how to get the fast path; a CLI that differs only in variables no
// dispatch reads passes the environment's checks. A resident whose home has a kubeconfig
// (credential plugins read any variable) still holds to its whole environment, and says so.
func TestHandoffRunner_EnvDeclineNamesVariables(t *testing.T) {
	const secret = "s3cret-rt-7f1c"
	taker := []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "TERM=xterm", "AGORA_HOME=/h", "_=/usr/bin/agora"}
	cases := []struct {
		name            string
		resident, whole bool
		cli             []string
		want            []string // named in the reason; nil: not declined for the environment
	}{
		{"script", true, false, append(slices.Clone(taker), "_=/bin/sh", "TERM_PROGRAM=vscode", "LS_COLORS=di=34", "EDITOR=vim", "SSH_AUTH_SOCK=/tmp/"+secret, "JOB="+secret), nil},
		{"path", true, false, append(slices.Clone(taker[1:]), "PATH=/opt/"+secret+":/usr/bin"), []string{"PATH differs", "restart it from this environment", "agora dispatch resident --stop"}},
		{"engine and proxy", true, false, append(slices.Clone(taker), "DOCKER_HOST=tcp://"+secret, "HTTPS_PROXY=http://u:"+secret+"@p", "AGORA_NEW_KNOB="+secret),
			[]string{"AGORA_NEW_KNOB, DOCKER_HOST, HTTPS_PROXY differ"}},
		{"serve", false, false, append(slices.Clone(taker), "no_proxy="+secret), []string{"environment is not serve's", "no_proxy differs", "restart serve from this one"}},
		{"whole", true, true, append(slices.Clone(taker), "TERM_PROGRAM="+secret), []string{"TERM_PROGRAM differs", "kubeconfig", "all of it", "agora dispatch resident --stop"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := envRunner(t, taker, c.resident, c.whole)
			_, err := r.Prepare(t.Context(), envRequest(r, c.cli), api.Peer{PID: -1})
			var d *api.Declined
			if !errors.As(err, &d) {
				t.Fatalf("Prepare: %v, want a decline", err)
			}
			envDecline := !strings.Contains(d.Why, "peer")
			if c.want == nil {
				if envDecline {
					t.Fatalf("declined for the environment: %s", d.Why)
				}
				return
			}
			if !envDecline {
				t.Fatalf("not declined for the environment: %s", d.Why)
			}
			for _, w := range c.want {
				if !strings.Contains(d.Why, w) {
					t.Errorf("reason %q does not say %q", d.Why, w)
				}
			}
			if strings.Contains(d.Why, secret) || strings.Contains(d.Why, "\n") {
				t.Errorf("reason holds a value or a newline: %q", d.Why)
			}
		})
	}
}

// TestHandoffRunner_EnvDeclineCapsNames: a CLI whose environment differs in many variables
// is told the first few by name and how many more, a long name cut, in a line of bounded
// length; one whose sums are missing is told only that its environment differs.
func TestHandoffRunner_EnvDeclineCapsNames(t *testing.T) {
	r := envRunner(t, []string{"PATH=/bin"}, true, false)
	cli := []string{"PATH=/bin"}
	for i := range 100 {
		cli = append(cli, "AGORA_K"+strings.Repeat("X", i)+"=1")
	}
	why := r.envDeclined(api.EnvSums(cli), api.DispatchEnv, "")
	if !strings.Contains(why, "92 more differ") || len(why) > 1000 {
		t.Errorf("reason for 100 variables: %q", why)
	}
	long := r.envDeclined(api.EnvSums([]string{"PATH=/bin", "AGORA_" + strings.Repeat("\u00e9", 500) + "=1"}), api.DispatchEnv, "")
	if !strings.Contains(long, "...") || len(long) > 400 {
		t.Errorf("reason for a 1,000-byte name: %q", long)
	}
	if why := r.envDeclined(nil, api.DispatchEnv, ""); !strings.Contains(why, "what a dispatch reads: it differs;") {
		t.Errorf("a CLI without sums: %q, want no name", why)
	}
}
