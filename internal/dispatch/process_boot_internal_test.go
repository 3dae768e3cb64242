package dispatch

import (
	"os/exec"
	"strconv"
	"testing"

	"github.com/agora-dev/agora/internal/compute/host"
	"github.com/agora-dev/agora/internal/dispatch/supervisorname"
)

// otherBoot is a boot id no real boot has had: a later boot's, to a name made in this one.
const otherBoot = "0123456789abcdef0123456789abcdef"

// asBoot makes this package see boot as the running boot's id until the returned func runs.
func asBoot(boot string) (restore func()) {
	prev := currentBoot
	currentBoot = func() string { return boot }
	return func() { currentBoot = prev }
}

// TestSupervisorName_ReadsBack: what this process writes reads back as what it wrote, with
// this boot's id.
func TestSupervisorName_ReadsBack(t *testing.T) {
	boot, err := host.BootID()
	if err != nil {
		t.Skipf("SKIP: no boot id here: %v", err)
	}
	for _, s := range []string{selfSupervisor(), parentSupervisor(), formatSupervisor(7, 0)} {
		pid, start, b, ok := supervisorname.Parse(s)
		if !ok || b != boot || s != strconv.Itoa(pid)+":"+strconv.FormatUint(start, 10)+":"+boot {
			t.Errorf("supervisorname.Parse(%q) = %d, %d, %q, %v: not this boot's name read back", s, pid, start, b, ok)
		}
	}
}

// TestSupervisorAlive_OtherBoot: pids and start times restart at boot, so a supervisor name
// read back from a record after a reboot can name, pid and start alike, a process of the new
// boot (with a deterministic boot, the new `agora orch serve` itself); Reap then took the
// dispatch for supervised for ever. A name carries its boot: one of another boot is dead
// however well its pid and start time match a running process, and so is every name with a
// boot to a process that cannot read the running boot's id. A name from before boot ids is
// judged as it always was.
func TestSupervisorAlive_OtherBoot(t *testing.T) {
	boot, err := host.BootID()
	if err != nil {
		t.Skipf("SKIP: no boot id here: %v", err)
	}
	if boot == otherBoot {
		t.Fatal("this boot's id is the test's made-up one")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	start, err := processStart(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	old := strconv.Itoa(cmd.Process.Pid) + ":" + strconv.FormatUint(start, 10)
	this := formatSupervisor(cmd.Process.Pid, start)
	if this != old+":"+boot {
		t.Fatalf("formatSupervisor = %q, want %q", this, old+":"+boot)
	}
	for _, tt := range []struct {
		what, name, boot string
		alive            bool
	}{
		{"this boot's name", this, boot, true},
		{"the old form", old, boot, true},
		{"an earlier boot's name", old + ":" + otherBoot, boot, false},
		{"this boot's name in a later boot", this, otherBoot, false},
		{"the old form in a later boot (as before boot ids)", old, otherBoot, true},
		{"this boot's name with no boot id readable", this, "", false},
		{"the old form with no boot id readable", old, "", true},
		{"a malformed name", old + ":" + boot[:31], boot, false},
	} {
		restore := asBoot(tt.boot)
		got := supervisorAlive(tt.name)
		restore()
		if got != tt.alive {
			t.Errorf("%s: supervisorAlive(%q) with boot %q = %v, want %v", tt.what, tt.name, tt.boot, got, tt.alive)
		}
	}
}

// TestFormatSupervisor_NoBootID: a process that cannot read the boot id names itself as
// before boot ids, which every reader still judges by pid and start time.
func TestFormatSupervisor_NoBootID(t *testing.T) {
	defer asBoot("")()
	if got := formatSupervisor(42, 7); got != "42:7" {
		t.Errorf("formatSupervisor with no boot id = %q, want 42:7", got)
	}
}
