package claudert

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/agoratest"
)

// fakeDir holds the fake claude executable, built from ./internal/fakeclaude by TestMain.
var fakeDir string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	// A run of fuzz targets only (scripts/fuzz-short.sh, and each of its workers) runs no fake
	// claude: building it there was seconds per process.
	if !agoratest.RunsNoTest() {
		dir, err := buildFakeClaude()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		fakeDir = dir
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// buildFakeClaude builds ./internal/fakeclaude as "claude" into a new directory it returns.
func buildFakeClaude() (string, error) {
	dir, err := os.MkdirTemp("", "claudert-fake-")
	if err != nil {
		return "", fmt.Errorf("make fake claude directory: %w", err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// -trimpath and no cgo, as make build compiles agora: the packages it shares with the
	// programs come from Go's build cache, whichever checkout it runs in.
	build := exec.Command(goTool, "build", "-trimpath", "-o", filepath.Join(dir, "claude"), "./internal/fakeclaude")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("build fake claude: %w\n%s", err, out)
	}
	return dir, nil
}

// record is what the fake claude saw.
type record struct {
	Argv         []string `json:"argv"`
	Stdin        string   `json:"stdin"`
	SystemPrompt string   `json:"system_prompt"`
	MCPConfig    string   `json:"mcp_config"`
	Cwd          string   `json:"cwd"`
	Env          []string `json:"env"`
}

// fakeConfig returns a Config that runs the fake claude in mode, and the file its record
// lands in.
func fakeConfig(t testing.TB, mode string, env ...string) (Config, string) {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "record.json")
	return Config{
		Dir:     t.TempDir(),
		TempDir: t.TempDir(),
		Env: append([]string{
			"PATH=" + fakeDir + ":/usr/bin:/bin",
			"HOME=" + t.TempDir(),
			"FAKECLAUDE_MODE=" + mode,
			"FAKECLAUDE_RECORD=" + rec,
		}, env...),
	}, rec
}

func readRecord(t testing.TB, path string) record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the fake's record: %v", err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("parse the fake's record: %v", err)
	}
	return r
}

// transcriptLines splits a transcript and checks every line is one JSON object with a type.
func transcriptLines(t testing.TB, s string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	var types []string
	for i, l := range lines {
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Type == "" {
			t.Fatalf("transcript line %d is not an event: %q", i, l)
		}
		types = append(types, ev.Type)
	}
	return types
}
