package dispatch_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/config"
)

// TestRedTeam30_StartWarmReapsEveryTargetsLeftovers: a resident process killed with -9
// leaves its slots' directories (and the mounts in them, in the host's namespace: the shared
// claim mount point, a claimed dispatch's binds). The next one must sweep them whatever its
// configuration says now: a target whose warm: was set to 0, or that was renamed or removed,
// is otherwise never swept and its mounts stay for the machine's life.
func TestRedTeam30_StartWarmReapsEveryTargetsLeftovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	e := newEnv(t)
	// What a killed holder left: a slot of target "gone" (no longer warm, or no longer in
	// agora.yaml) with its claim mount point still mounted.
	slot := filepath.Join(e.d.StateDir, ".warm", "gone", "slot-123")
	mp := filepath.Join(slot, "claim")
	if err := os.MkdirAll(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(mp, mp, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mp, unix.MNT_DETACH) })
	// and its hold file, which a killed holder's lock no longer holds (a slot directory with
	// no hold yet is one being made, left to its maker for a minute: 91227fa).
	if err := os.WriteFile(filepath.Join(slot, "hold"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Now one target keeps warm slots; "gone" is not among them.
	tg := e.d.Config.Targets[config.DefaultTarget]
	tg.Warm = 1
	e.d.Config.Targets[config.DefaultTarget] = tg
	w, err := e.d.StartWarm(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := os.Stat(slot); err == nil {
		t.Fatalf("a killed holder's slot of a target no longer warm was left with its mounts: %s", slot)
	}
}
