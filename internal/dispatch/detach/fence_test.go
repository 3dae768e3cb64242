package detach

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lease/fencefile"
)

// TestSpawn_PassesLeaderFence: a detached supervisor is told its parent's leader fence, and
// none it would inherit from elsewhere.
func TestSpawn_PassesLeaderFence(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "env")
	bin := filepath.Join(dir, "supervise")
	script := "#!/bin/sh\nprintf '%s' \"${" + fencefile.EnvName + "-unset}\" > " + got + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(fencefile.EnvName, "00:/not/this/one")
	for _, want := range []string{"unset", "0123:/home/leader.fence"} {
		restore := fencefile.SetInherited("")
		if want != "unset" {
			fencefile.SetInherited(fencefile.EnvName + "=" + want)
		}
		s := &Supervisors{Bin: bin}
		exited, _, err := s.spawn("local", "id")
		restore()
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatal("the supervisor never exited")
		}
		b, err := os.ReadFile(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("the supervisor was told %s=%q, want %q", fencefile.EnvName, b, want)
		}
	}
}
