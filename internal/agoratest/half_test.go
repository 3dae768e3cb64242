package agoratest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// halfProbe marks TestHalve's child: only there does TestMain halve this package.
const halfProbe = "AGORATEST_HALF_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(halfProbe) != "" {
		Halve("^TestHalfProbe_A$")
	}
	os.Exit(m.Run())
}

func TestHalfProbe_A(t *testing.T) {
	if os.Getenv(halfProbe) == "" {
		t.Skip("SKIP: TestHalve's probe: it runs only in TestHalve's child")
	}
}

func TestHalfProbe_B(t *testing.T) {
	if os.Getenv(halfProbe) == "" {
		t.Skip("SKIP: TestHalve's probe: it runs only in TestHalve's child")
	}
}

// Half 1 runs the tests the split matches and no other; a half asked beside a -run of the
// caller's is refused, not silently replaced.
func TestHalve(t *testing.T) {
	if os.Getenv(halfProbe) != "" {
		t.Skip("SKIP: TestHalve's child runs only the probes")
	}
	child := func(half string, args ...string) (string, error) {
		cmd := exec.Command(os.Args[0], append([]string{"-test.v"}, args...)...)
		cmd.Env = append(os.Environ(), halfProbe+"=1", HalfEnv+"="+half)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := child("1")
	if err != nil || !strings.Contains(out, "--- PASS: TestHalfProbe_A") || strings.Contains(out, "TestHalfProbe_B") || strings.Contains(out, "=== RUN   TestWait") {
		t.Errorf("half 1 (err %v):\n%s\nwant TestHalfProbe_A alone", err, out)
	}
	out, err = child("1", "-test.run", "TestHalfProbe_B")
	if err == nil || !strings.Contains(out, "run the package whole") || strings.Contains(out, "=== RUN") {
		t.Errorf("half 1 with -run (err %v):\n%s\nwant a refusal", err, out)
	}
	for _, c := range []struct{ half, run, skip, want string }{
		{"1", "", "", "test.run"},
		{"2", "", "", "test.skip"},
		{"3", "", "", ""},
		{"2", "", "X", ""},
	} {
		got, err := halfFlag(c.half, c.run, c.skip)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("halfFlag(%q, %q, %q) = %q, %v; want %q", c.half, c.run, c.skip, got, err, c.want)
		}
	}
}
