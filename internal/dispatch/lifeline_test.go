package dispatch_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestLifeline_SandboxEndsWithItsSupervisor: the real worker, in a real bubblewrap sandbox,
// ends the sandbox when its supervisor's end of the lifeline closes, as a supervisor killed
// with -9 closes it. This is what covers the moment bwrap leaves uncovered: its
// --die-with-parent binds the sandbox only once released, so CI saw an agent outlive its
// killed supervisor (TestDispatch_SupervisorKilled). The worker here waits for a warm
// claim that never comes, so only the lifeline can end it.
func TestLifeline_SandboxEndsWithItsSupervisor(t *testing.T) {
	requireSandbox(t)
	p, err := local.New(local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	claimR, claimW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer claimW.Close()
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer lifeW.Close()
	var stdout, stderr agoratest.SyncBuffer
	h, err := p.Start(t.Context(), compute.Spec{
		ID:   "lifeline",
		Argv: []string{wire.BinPath, "worker"},
		Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp",
			fmt.Sprintf("%s=3", wire.ClaimFDEnv), fmt.Sprintf("%s=4", wire.LifelineFDEnv)},
		Dir:    "/",
		Files:  []*os.File{claimR, lifeR},
		Binds:  []compute.Bind{{Src: agoratest.Worker(agoraBin), Dst: wire.BinPath}},
		Stdout: &stdout, Stderr: &stderr,
	})
	claimR.Close()
	lifeR.Close()
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan compute.Exit, 1)
	go func() {
		exit, _ := h.Wait()
		ended <- exit
	}()
	select {
	case exit := <-ended:
		t.Fatalf("the worker ended while its supervisor lived: %+v; stderr %q", exit, stderr.String())
	case <-time.After(500 * time.Millisecond):
	}
	lifeW.Close()
	select {
	case exit := <-ended:
		if exit.Code == 0 {
			t.Errorf("exit %+v, want a failure", exit)
		}
		if !strings.Contains(stderr.String(), "supervisor is gone") {
			t.Errorf("stderr %q does not say why", stderr.String())
		}
	case <-time.After(10 * time.Second):
		p.Cancel(t.Context(), h.TaskID())
		t.Fatalf("the sandbox outlived its supervisor's lifeline; stderr %q", stderr.String())
	}
}
