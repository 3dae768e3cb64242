package cron_test

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/cron"
)

// zoneHelperEnv makes the test binary the helper TestLoadZone_NoSystemDatabase runs;
// zoneGorootEnv tells it the Go root whose zone database the sandbox hides.
const (
	zoneHelperEnv = "AGORA_TEST_CRON_ZONE_HELPER"
	zoneGorootEnv = "AGORA_TEST_CRON_GOROOT"
)

// goroot is the Go installation's root: runtime.GOROOT, which a binary built with -trimpath
// (as make test builds the tests) does not know, else `go env GOROOT`.
func goroot(t *testing.T) string {
	t.Helper()
	if r := runtime.GOROOT(); r != "" {
		return r
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env GOROOT: %q, %v", out, err)
	}
	return strings.TrimSpace(string(out))
}

// TestLoadZone_NoSystemDatabase runs this test binary in a bubblewrap sandbox where neither
// the system's zone database nor Go's own copy exists: a schedule's zone still loads, from the
// database the package links (time/tzdata). Without that import the helper fails.
func TestLoadZone_NoSystemDatabase(t *testing.T) {
	if os.Getenv(zoneHelperEnv) == "1" {
		for _, p := range []string{"/usr/share/zoneinfo/Europe/Berlin", os.Getenv(zoneGorootEnv) + "/lib/time/zoneinfo.zip"} {
			if _, err := os.Stat(p); err == nil {
				t.Fatalf("%s is visible; the sandbox should hide it", p)
			}
		}
		s, err := cron.Parse("0 2 * * *", "Europe/Berlin")
		if err != nil {
			t.Fatalf("without a system zone database: %v", err)
		}
		if s.Zone() != "Europe/Berlin" {
			t.Fatalf("zone %q", s.Zone())
		}
		return
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("SKIP: bubblewrap (bwrap) is not installed; the test hides the host's zone database in a sandbox (apt-get install bubblewrap)")
	}
	root := goroot(t)
	args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/usr/share/zoneinfo",
		"--tmpfs", root + "/lib/time", "--unshare-all", "--die-with-parent", "--setenv", zoneHelperEnv, "1",
		"--setenv", zoneGorootEnv, root, "--unsetenv", "ZONEINFO", os.Args[0], "-test.run=^TestLoadZone_NoSystemDatabase$", "-test.count=1"}
	out, err := exec.CommandContext(t.Context(), bwrap, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helper in a sandbox without zoneinfo: %v\n%s", err, out)
	}
}
