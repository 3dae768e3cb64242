package detach

import (
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestSupervisors_Launch_DoneAtTheSupervisorsExit: Launch returns the started record and a
// channel that is still open while the supervisor runs and closes when it exits (for a cold
// supervisor its exit follows the end it records), so an MCP server following the dispatch
// reads its end then rather than at its next poll.
func TestSupervisors_Launch_DoneAtTheSupervisorsExit(t *testing.T) {
	dir := t.TempDir()
	bin := fakeAgora(t, dir, `touch '`+dir+`/started-'"$3"
exec sleep 30`)
	s := &Supervisors{Bin: bin, Records: newFakeRecords(dir, accepted("D1"))}
	r, done, err := s.Launch(t.Context(), "D1")
	if err != nil || r.State != lifecycle.DispatchStarted {
		t.Fatalf("Launch = %+v, %v; want D1 started", r, err)
	}
	if done == nil {
		t.Fatal("Launch returned no done channel")
	}
	select {
	case <-done:
		t.Fatal("done closed while the supervisor still runs")
	default:
	}
	pids := spawned(t, dir)
	if len(pids) != 1 {
		t.Fatalf("spawned %v, want one supervisor", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done // a supervisor that exits, however, closes it; the test's timeout says if never
	waitReaped(t, pids[0])
}
