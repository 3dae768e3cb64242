package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
)

// slotPlaceAttacks is what the agent of a claimed Kubernetes slot tries on its read-only places
// beyond the isolation probe's chmod, append, remove and create:
// the slot's /agora is writable where a cold pod's is not, and the places are emptyDirs of the
// same node file system, so: a hard link of a place's file into the writable workspace (then
// written through), a move of it out of its place, a rename of the place itself, a write
// through /proc/self/fd, and the filler: its socket, its processes, its volume. One line each.
const slotPlaceAttacks = `
cd /agora/workspace
for f in /agora/bundle/manifest.json $(find /agora/bundle -type f ! -name manifest.json | sort | head -1); do
  n=$(basename "$f"); before=$(cksum < "$f")
  if ln "$f" ./hl 2>/dev/null; then echo x >> ./hl 2>/dev/null; echo "$n hardlink=ok"; else echo "$n hardlink=refused"; fi
  mv "$f" ./mv 2>/dev/null
  [ -e "$f" ] && echo "$n move-out=kept" || echo "$n move-out=gone"
  exec 3<"$f"; echo x >> /proc/self/fd/3 2>/dev/null && echo "$n procfd-write=ok" || echo "$n procfd-write=refused"; exec 3<&-
  [ "$(cksum < "$f")" = "$before" ] && echo "$n content=unchanged" || echo "$n content=changed"
  rm -f ./hl ./mv
done
mv /agora/bundle /agora/bundle.x 2>/dev/null && echo place-rename=ok || echo place-rename=refused
[ -d /agora/bundle ] && echo place=kept || echo place=gone
[ -S /agora/fill/fill.sock ] && echo fillsock=yes || echo fillsock=no
touch /agora/fill/x 2>/dev/null && echo fillvol=writable || echo fillvol=not-writable
for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -q 'agora-worker [w]orker fill' && echo fillproc=seen || echo fillproc=unseen
for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -q '[c]d /agora/workspace' && echo ownproc=seen || echo ownproc=unseen
`

// TestRedTeam35_RealPodSlotPlaceAttacks runs slotPlaceAttacks in a cold pod and in a claimed
// slot on the real kubelet: every line is the same in both, and every attack is refused.
func TestRedTeam35_RealPodSlotPlaceAttacks(t *testing.T) {
	e, w, _ := podWarmEnv(t, 1)
	e.subagent("attacker", slotPlaceAttacks)
	req := dispatch.Request{Subagent: "attacker", Repo: gitRepo(t, map[string]string{"README": "one\n"}), Target: "pod", Timeout: 4 * time.Minute}
	cold := e.run(req)
	wantFinished(t, cold)
	if !agoratest.Poll(3*time.Minute, func() bool { return podCounts(w).Ready >= 1 }) {
		t.Fatalf("kubernetes warm slots: %+v, want 1 ready", podCounts(w))
	}
	hot := e.run(req)
	wantFinished(t, hot)
	if c := podCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want claimed 1, cold 0: the attacks did not run in a slot", c)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	t.Logf("cold:\n%s\nclaimed:\n%s", co, ho)
	if co != ho {
		t.Errorf("the claimed slot's attack lines differ from the cold pod's")
	}
	lines := strings.Split(strings.TrimSpace(ho), "\n")
	if len(lines) < 10 || lines[0] != "manifest.json hardlink=refused" || lines[len(lines)-1] != "ownproc=seen" {
		t.Fatalf("attack lines %q: want the manifest's first and the process probe's control (this script seen) last", lines)
	}
	for _, l := range lines[:len(lines)-1] {
		for _, bad := range []string{"=ok", "=gone", "=changed", "=yes", "=writable", "=seen"} {
			if strings.HasSuffix(l, bad) {
				t.Errorf("attack succeeded in the claimed slot: %s", l)
			}
		}
	}
}
