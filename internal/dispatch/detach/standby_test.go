package detach

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
)

// fakeStandbys are the standbys of a warm target "local" (want n) whose supervisor is a
// script speaking the standby protocol on fd 3: it says ready with the template's shape,
// takes one claim, appends "PID ID" to dir/claims, answers claimed, says ended and stays
// until its holder's end closes.
func fakeStandbys(t *testing.T, n int) (*Standbys, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: standbys are held only by a root serve")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "dispatches")
	tdir := filepath.Join(state, ".warm", "local")
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tdir, "template.json"), []byte(`{"argv":["/agora/bin/agora-worker","worker"],"env":[],"dir":"/agora/workspace","network":false,"sandbox":"","limits":{},"binds":[],"files":0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	shape, err := dispatch.WarmShape(state, "local")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "agora")
	script := "#!/bin/sh\n[ \"$1 $2 $3 $4\" = 'dispatch supervise --standby local' ] || exit 64\n" +
		"echo $$ >> '" + dir + "/spawns'\n" +
		"echo 'ready " + shape + "' >&3\n" +
		"read l <&3 || exit 0\n" +
		"id=${l#claim }\n" +
		"echo \"$$ $id\" >> '" + dir + "/claims'\n" +
		"echo \"claimed $id\" >&3\n" +
		"echo ended >&3\n" +
		"read more <&3 && echo refused >&3\n" +
		"exit 0\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &dispatch.Dispatcher{StateDir: state, AgoraBin: bin,
		Config: &config.Config{Targets: map[string]config.Target{"local": {Warm: n}}}}
	sb, err := NewStandbys(t.Context(), d, nil)
	if err != nil || sb == nil {
		t.Fatalf("NewStandbys: %v, %v", sb, err)
	}
	t.Cleanup(func() {
		sb.Close()
		for _, pid := range spawned(t, dir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return sb, dir
}

func countsOf(sb *Standbys) (c struct{ ready, claimed, cold int }) {
	for _, x := range sb.Counts() {
		if x.Target == "local" {
			c.ready, c.claimed, c.cold = x.Ready, int(x.Claimed), int(x.Cold)
		}
	}
	return c
}

// TestStandbys_ConcurrentClaimsNeverShare: 200 claims at once on a pool of 4 standbys: each
// standby takes at most one dispatch, no dispatch goes to two, every claim that returned a
// standby is one the standby recorded, and the others are counted cold.
func TestStandbys_ConcurrentClaimsNeverShare(t *testing.T) {
	sb, dir := fakeStandbys(t, 4)
	agoratest.WaitFor(t, 30*time.Second, "4 ready standbys", func() bool { return countsOf(sb).ready == 4 })
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if _, _, took := sb.claim("local", fmt.Sprintf("D%03d", i)); took {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(dir, "claims"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	pids, ids := map[string]bool{}, map[string]bool{}
	for _, l := range lines {
		pid, id, _ := strings.Cut(l, " ")
		if pids[pid] || ids[id] {
			t.Fatalf("claims %q: a standby or a dispatch twice", lines)
		}
		pids[pid], ids[id] = true, true
	}
	if int64(len(lines)) != ok.Load() || ok.Load() < 4 {
		t.Fatalf("%d claims returned a standby, %d recorded by standbys; want equal and >= 4", ok.Load(), len(lines))
	}
	if c := countsOf(sb); c.claimed != len(lines) || c.claimed+c.cold != 200 {
		t.Errorf("counts %+v, want claimed %d and claimed+cold 200", c, len(lines))
	}
}

// TestStandbys_NoTemplateGoesCold: before the target's first cold dispatch there is nothing
// to start a standby from: claims go cold, counted, and nothing is spawned.
func TestStandbys_NoTemplateGoesCold(t *testing.T) {
	sb, dir := fakeStandbys(t, 2)
	agoratest.WaitFor(t, 30*time.Second, "2 ready standbys", func() bool { return countsOf(sb).ready == 2 })
	if err := os.Remove(filepath.Join(dir, "dispatches", ".warm", "local", "template.json")); err != nil {
		t.Fatal(err)
	}
	if _, _, took := sb.claim("local", "D1"); took {
		t.Fatal("a claim without a template took a standby")
	}
	if c := countsOf(sb); c.cold != 1 || c.claimed != 0 {
		t.Errorf("counts %+v, want cold 1", c)
	}
}

// TestStandbys_EndedBeforeExit: a claimed standby's word that its dispatch ended reaches the
// claim's caller while the standby still runs (serve reads the record at once instead of
// at its next poll, and before the standby has closed agora.db and exited).
func TestStandbys_EndedBeforeExit(t *testing.T) {
	sb, _ := fakeStandbys(t, 1)
	agoratest.WaitFor(t, 30*time.Second, "a ready standby", func() bool { return countsOf(sb).ready == 1 })
	exited, ended, took := sb.claim("local", "D1")
	if !took {
		t.Fatal("the ready standby did not take the claim")
	}
	select {
	case <-ended:
	case <-exited:
		t.Fatal("the standby exited before its word that the dispatch ended was seen")
	case <-time.After(30 * time.Second):
		t.Fatal("no word of the end within 30s")
	}
	select {
	case <-exited:
		t.Fatal("exited closed with ended: the standby waits for its holder's end, it has not exited")
	default:
	}
}
