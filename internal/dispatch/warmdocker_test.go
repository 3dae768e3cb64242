package dispatch_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/dispatch"
)

// dockerWarmEnv is an env whose docker target "box" keeps n warm slots, held by this
// (resident) Dispatcher.
func dockerWarmEnv(t testing.TB, n int) (*env, *dispatch.WarmPools) {
	t.Helper()
	image := requireContainer(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: docker warm slots need root (a uid of the sandbox range per slot)")
	}
	e := newEnv(t)
	e.addDockerTarget(image)
	tg := e.home.Config.Targets["box"]
	tg.Warm = n
	e.home.Config.Targets["box"] = tg
	w, err := e.d.StartWarm(t.Context())
	if err != nil || w == nil {
		t.Fatalf("StartWarm: %v, %v", w, err)
	}
	t.Cleanup(w.Close)
	return e, w
}

func boxCounts(w *dispatch.WarmPools) warm.Counts {
	for _, c := range w.Counts() {
		if c.Target == "box" {
			return c
		}
	}
	return warm.Counts{}
}

// A docker target's warm dispatch, end to end in the resident Dispatcher on podman: the first
// dispatch starts cold and teaches the pool its shape; the next claims a started slot
// container over the gateway's socket and ends exactly as the cold one did: state, output,
// patch, isolation, the secret delivered and nowhere in the logs; the slot is used once.
func TestDockerWarm_DispatchRunsInSlot(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	const secret = "warm-secret-7c1f0a93"
	e.envBundle("creds", nil, map[string]string{"API_TOKEN": secret})
	e.subagent("editor", `printf 'hello\n' > greeting.txt
sed -i 's/one/uno/' README
[ "$API_TOKEN" = `+secret+` ] && echo token=ok
echo "uid-nonroot=$([ "$(id -u)" != 0 ] && echo yes)"`)
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n"})
	req := dispatch.Request{Subagent: "editor", Repo: repo, Target: "box", Envs: []string{"creds"}, Timeout: 2 * time.Minute}
	cold := e.run(req)
	wantFinished(t, cold)
	deadline := time.Now().Add(90 * time.Second)
	for boxCounts(w).Ready < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("docker warm slots: %+v, want 1 ready", boxCounts(w))
		}
		time.Sleep(50 * time.Millisecond)
	}
	hot := e.run(req)
	t.Logf("warm: %s %s %s stdout %q stderr %q", hot.State, hot.Reason, hot.Detail, e.stdout(hot), e.stderr(hot))
	wantFinished(t, hot)
	if c := boxCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want claimed 1 (the warm dispatch), cold 0 (the first ran before the pool)", c)
	}
	for _, r := range []*dispatch.Record{cold, hot} {
		out := e.stdout(r)
		if !strings.Contains(out, "token=ok") || !strings.Contains(out, "uid-nonroot=yes") {
			t.Errorf("dispatch %s: stdout %q", r.ID, out)
		}
		if strings.Contains(out, secret) || strings.Contains(e.stderr(r), secret) {
			t.Errorf("dispatch %s: the secret is in its logs", r.ID)
		}
	}
	if cold.Isolation != hot.Isolation {
		t.Errorf("isolation: cold %q, warm %q", cold.Isolation, hot.Isolation)
	}
	if cp, hp := e.patch(cold), e.patch(hot); cp != hp || !strings.Contains(hp, "+uno") || !strings.Contains(hp, "+hello") {
		t.Errorf("patches differ or lack the edit:\ncold:\n%s\nwarm:\n%s", cp, hp)
	}
	if !strings.HasPrefix(hot.ProviderTaskID, "docker:") {
		t.Errorf("warm task id %q", hot.ProviderTaskID)
	}
}

// `agora dispatch cancel` of a dispatch running in a docker slot kills and removes the slot's
// container through the record's task id, as for a cold container (the slot container carries
// agora.slot, not agora.dispatch).
func TestDockerWarm_Cancel(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	e.subagent("sleeper", `echo started; sleep 120`)
	req := dispatch.Request{Subagent: "sleeper", Target: "box", Timeout: 3 * time.Minute, Actor: "test"}
	// The first, cold, dispatch teaches the pool the shape; cancel it at once.
	for i, wantClaimed := range []uint64{0, 1} {
		if i == 1 {
			deadline := time.Now().Add(90 * time.Second)
			for boxCounts(w).Ready < 1 {
				if time.Now().After(deadline) {
					t.Fatalf("docker warm slots: %+v, want 1 ready", boxCounts(w))
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		ctx := t.Context()
		r, err := e.d.Accept(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *dispatch.Record, 1)
		go func() {
			rec, err := e.d.Supervise(ctx, r.ID, nil)
			if err != nil {
				t.Error(err)
			}
			done <- rec
		}()
		var task string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && task == ""; time.Sleep(100 * time.Millisecond) {
			if cur, err := e.d.Records.Get(ctx, r.ID); err == nil {
				task = cur.ProviderTaskID
			}
		}
		if task == "" {
			t.Fatalf("dispatch %d: no task recorded", i)
		}
		if _, err := e.d.Cancel(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case final := <-done:
			if final == nil || final.State != dispatch.StateCancelled {
				t.Fatalf("dispatch %d ended %+v, want cancelled", i, final)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("dispatch %d: not cancelled within 60 s", i)
		}
		if c := boxCounts(w); c.Claimed != wantClaimed {
			t.Fatalf("dispatch %d: counts %+v, want claimed %d", i, c, wantClaimed)
		}
	}
}
