package local

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

const rt36HolderEnv = "AGORA_TEST_RT36_HOLDER"

// rt36Template is the slot both halves build: a command that says it started and then runs
// until killed; for a prestarted slot it runs on its claim pipe's EOF too.
func rt36Template(prestart bool) (compute.Spec, func(compute.WarmOptions) compute.WarmOptions) {
	tmpl := compute.Spec{ID: "tmpl", Argv: []string{"sh", "-c", "echo start > /agora/out/x; exec sleep 600"},
		Env: []string{"PATH=/usr/bin:/bin"}, Binds: []compute.Bind{{Src: "/nonexistent-at-fill", Dst: "/agora/out", Writable: true}}}
	opts := func(o compute.WarmOptions) compute.WarmOptions { return o }
	if prestart {
		tmpl.Argv = []string{"sh", "-c", "head -c1 <&$CLAIM_FD >/dev/null; echo start > /agora/out/x; exec sleep 600"}
		opts = func(o compute.WarmOptions) compute.WarmOptions { o.PrestartEnv = "CLAIM_FD"; return o }
	}
	return tmpl, opts
}

// TestRedTeam36_HolderKilledWhileStartRecorded: the standby holding a warm slot is killed
// with -9 inside beforeRelease (its dispatch's started record committed, the slot not yet
// released). What holds: the claimed sandbox dies with its holder (--die-with-parent), and
// ReapSlots removes the slot. What does not (known, described here, not fixed): the dying
// holder's descriptors close before its parent-death signal is sent, and a held bwrap reads
// EOF on --block-fd as a release (a prestarted worker's claim pipe the same), so in about a
// third of runs the claim's command starts, unsupervised, for the moment until the kill.
func TestRedTeam36_HolderKilledWhileStartRecorded(t *testing.T) {
	if env := os.Getenv(rt36HolderEnv); env != "" {
		rt36Holder(t, env)
		return
	}
	requireSlots(t)
	for name, prestart := range map[string]bool{"held": false, "prestarted": true} {
		t.Run(name, func(t *testing.T) {
			dir, out := filepath.Join(t.TempDir(), "slots"), t.TempDir()
			mode := "held"
			if prestart {
				mode = "prestarted"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestRedTeam36_HolderKilledWhileStartRecorded$")
			cmd.Env = append(os.Environ(), rt36HolderEnv+"="+mode+":"+dir+":"+out)
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			cmd.Process.Kill()
			cmd.Wait()
			tid, ok := strings.CutPrefix(strings.TrimSpace(line), "recorded ")
			if !ok {
				t.Fatalf("the holder said %q", line)
			}
			id, err := parseTaskID(tid)
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				st, err := readProcStat(id.pid)
				if err != nil || st.start != id.start || isZombie(id.pid) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the claimed sandbox %s outlived its holder", tid)
				}
			}
			if err := ReapSlots(t.Context(), dir); err != nil {
				t.Fatal(err)
			}
			// Not asserted: the command may start (see the test's comment).
			if _, err := os.Stat(filepath.Join(out, "x")); err == nil {
				t.Log("the claim's command started after its holder's kill, before --die-with-parent ended it")
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("ReapSlots left %v", ents)
			}
		})
	}
}

// rt36Holder is the holder's half: it fills a slot, claims it and, in beforeRelease, says
// the start is recorded and waits for its kill.
func rt36Holder(t *testing.T, env string) {
	parts := strings.SplitN(env, ":", 3)
	p := newProvider(t, Options{})
	tmpl, opts := rt36Template(parts[0] == "prestarted")
	slot := newSlot(t, p, tmpl, opts(compute.WarmOptions{Dir: parts[1], ClaimRoot: "/agora", PerDispatchEnv: []string{"AGORA_DISPATCH_ID"}}))
	spec := tmpl
	spec.ID, spec.Binds = "d1", []compute.Bind{{Src: parts[2], Dst: "/agora/out", Writable: true}}
	_, err := p.StartInSlotWith(t.Context(), slot, spec, func(taskID string) error {
		os.Stdout.WriteString("recorded " + taskID + "\n")
		agoratest.Hang() // until the test kills it
		return errors.New("not killed")
	})
	t.Fatalf("the holder outlived its kill: %v", err)
}
