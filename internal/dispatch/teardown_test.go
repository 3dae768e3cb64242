package dispatch_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestSupervise_BackgroundTeardowns: after BackgroundTeardowns, Supervise returns with the
// dispatch's end recorded while its release is still held back (the stage held, its work
// directories and, as root, its disk quota's mount still there), and the wait returns only
// once the release is done: the held index entry, the work directories and the mount are
// gone; the logs stay, as after an inline release. Attack: a release that ran before
// Supervise returned would keep Supervise from returning while it is held.
func TestSupervise_BackgroundTeardowns(t *testing.T) {
	yaml := ""
	if os.Geteuid() == 0 {
		yaml = "targets:\n  local:\n    disk: 64MiB\n"
	}
	e := newEnvYAML(t, yaml)
	e.subagent("hi", "echo hi; echo there > f")
	wait := e.d.BackgroundTeardowns()
	entered, hold := make(chan struct{}), make(chan struct{})
	dispatch.SetBeforeRelease(e.d, func() { close(entered); <-hold })
	released := false
	t.Cleanup(func() {
		if !released {
			close(hold)
		}
		wait()
	})

	done := make(chan *dispatch.Record, 1)
	go func() {
		r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "hi", Actor: "test", Timeout: 30 * time.Second})
		if err == nil {
			r, err = e.d.Supervise(t.Context(), r.ID, nil)
		}
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	<-entered
	var r *dispatch.Record
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		// A deadline to fail by, not a measure: Supervise waits on the held release.
		t.Fatal("Supervise did not return while its release was held: it releases before it returns")
	}
	if r == nil {
		t.Fatal("no record")
	}
	if r.State != lifecycle.DispatchFinished || e.stdout(r) != "hi\n" {
		t.Fatalf("dispatch = %s/%s (%s), want finished with its stdout", r.State, r.Reason, r.Detail)
	}
	stage := filepath.Join(e.home.Dir, home.DispatchDir, r.ID)
	heldEntry := filepath.Join(e.home.Dir, home.DispatchDir, ".held", r.ID)
	if _, err := os.Stat(heldEntry); err != nil {
		t.Fatalf("the stage is not held while its release waits: %v", err)
	}
	bundle := filepath.Join(stage, "bundle")
	if os.Geteuid() == 0 {
		bundle = filepath.Join(stage, "pinned", "bundle") // on the pinned content's tmpfs
	}
	if _, err := os.Stat(bundle); err != nil {
		t.Fatalf("the bundle is gone while the release waits: %v", err)
	}
	if os.Geteuid() == 0 && len(agoratest.MountsUnder(t, stage)) == 0 {
		t.Fatal("the disk quota is unmounted while the release waits")
	}

	close(hold)
	released = true
	wait()
	if _, err := os.Stat(heldEntry); !os.IsNotExist(err) {
		t.Errorf("the held index entry stays after the wait: %v", err)
	}
	for _, dir := range []string{"bundle", "disk", "pinned", "workspace", "out"} {
		if _, err := os.Stat(filepath.Join(stage, dir)); !os.IsNotExist(err) {
			t.Errorf("%s stays after the wait: %v", dir, err)
		}
	}
	if m := agoratest.MountsUnder(t, stage); len(m) != 0 {
		t.Errorf("mounts stay after the wait: %v", m)
	}
	// Nothing the caller reads went with the release: the record is as it was.
	got, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil || got.State != lifecycle.DispatchFinished || e.stdout(got) != "hi\n" {
		t.Errorf("after the wait: %+v, %v", got, err)
	}
}
