package selftest_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/selftest"
)

// TestSelftest_DockerCorpus runs the corpus (providerSlice: a slice of it unless WholeEnv) on a `provider: docker` target through
// podman's Docker API, in the toolchain image the container tests use (scripts/images.sh
// toolchain: busybox, git, curl and perl). No attack may be seen allowed,
// every legitimate operation that ran must work, and the only rows that may fail are those
// whose tool the image does not have (python3, go: not run, saying which) or whose control
// the host does not enforce.
func TestSelftest_DockerCorpus(t *testing.T) {
	needTools(t)
	host, image := os.Getenv("DOCKER_HOST"), os.Getenv("AGORA_TOOLCHAIN_IMAGE")
	if host == "" || image == "" {
		t.Skip("SKIP: DOCKER_HOST or AGORA_TOOLCHAIN_IMAGE unset: export the lines scripts/podman.sh and scripts/images.sh toolchain print")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: a docker target needs agora as root (it hands each dispatch a uid of its own: docs/providers.md)")
	}
	yml := fmt.Sprintf("targets:\n  box:\n    provider: docker\n    image: %s\n    docker_host: %s\n", image, host)
	_, res, code := runSelftest(t, yml, append([]string{"--target", "box"}, providerSlice(t, "docker")...)...)
	rep := res.Reports[0]
	logTimes(t, rep)
	checkContained(t, rep, nil)
	if code != 0 && rep.Failed == 0 {
		t.Errorf("exit %d with no failed row", code)
	}
}

// checkContained fails on any row that shows a boundary broken or a legitimate operation
// refused, and on a row not run for any reason but a tool the sandbox's image lacks; it logs
// the rows that did not run. known names rows that fail on this provider for a reason of
// agora's own, each with it: logged, and a failure once the row passes (drop it then).
func checkContained(t *testing.T, rep selftest.Report, known map[string]string) {
	t.Helper()
	var missing []string
	for _, r := range rep.Rows {
		why, isKnown := known[r.ID]
		switch {
		case r.Pass && isKnown:
			t.Errorf("%s passes now: drop it from the known failures (%s)", r.ID, why)
		case isKnown:
			t.Logf("KNOWN FAILURE %s: %s; seen %s: %s", r.ID, why, r.Seen, r.Evidence)
		case r.Pass:
		case r.Seen == selftest.NotRun && strings.Contains(r.Evidence, "is not installed in the sandbox"):
			missing = append(missing, r.ID)
			t.Logf("%s: not run: %s", r.ID, r.Evidence)
		case r.Seen == selftest.NotEnforced:
			t.Logf("%s: not enforced here: %s", r.ID, r.Evidence)
		default:
			t.Errorf("%s: expected %s, seen %s: %s", r.ID, r.Expected, r.Seen, r.Evidence)
		}
	}
	if len(missing) > 0 {
		t.Logf("not run, a tool missing from the image: %s", strings.Join(missing, " "))
	}
	if len(missing) > len(rep.Rows)/2 {
		t.Errorf("%d of %d rows not run for a missing tool: the image is not one the corpus can attack from", len(missing), len(rep.Rows))
	}
}
