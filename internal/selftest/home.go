package selftest

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed bundle
var bundleFS embed.FS

// Capability and subagent names in the throw-away home's catalog.
const (
	subagentName    = "selftest"
	subagentNetName = "selftest-net"
	subagentGWName  = "selftest-gw"
)

// manifest is the throw-away home's catalog: the attack programs as one capability, and the
// subagents that run them: without a network grant, behind the egress proxy (bundle's
// capability-net.yaml), and under a model runtime with the model gateway (gateway.go).
const manifest = `version: 1
capabilities:
  - name: selftest
    from: capabilities/selftest
  - name: selftest-net
    from: capabilities/selftest-net
  - name: selftest-gw
    from: capabilities/selftest-gw
subagents:
  - name: selftest
    from: subagents/selftest.yaml
  - name: selftest-net
    from: subagents/selftest-net.yaml
  - name: selftest-gw
    from: subagents/selftest-gw.yaml
`

// writeManifest lays out the catalog under dir: bundle/ and every attack's program.
func writeManifest(dir string, attacks []Attack) error {
	files := map[string]string{
		"capabilities/selftest/capability.yaml":     "bundle/capability.yaml",
		"capabilities/selftest/run.sh":              "bundle/run.sh",
		"capabilities/selftest-net/capability.yaml": "bundle/capability-net.yaml",
		"subagents/selftest.yaml":                   "bundle/subagent.yaml",
		"subagents/selftest-net.yaml":               "bundle/subagent-net.yaml",
		"capabilities/selftest-gw/capability.yaml":  "bundle/capability-gw.yaml",
		"subagents/selftest-gw.yaml":                "bundle/subagent-gw.yaml",
	}
	for to, from := range files {
		b, err := fs.ReadFile(bundleFS, from)
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, to), b); err != nil {
			return err
		}
	}
	for _, a := range attacks {
		if err := writeFile(filepath.Join(dir, "capabilities/selftest/attacks", a.ID+".sh"), a.Program); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest))
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// writeRepo makes the workspace every attack is dispatched on: a git repository with one
// commit of README.md.
func writeRepo(ctx context.Context, dir string) error {
	if err := writeFile(filepath.Join(dir, "README.md"), []byte("# selftest\n")); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "README.md"},
		{"-c", "user.name=selftest", "-c", "user.email=selftest@example.com", "commit", "-q", "-m", "selftest"},
	} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s in the selftest repository: %w: %s", args[0], err, out)
		}
	}
	return nil
}

// writeProbe makes the host-side bait: a world-readable secret and a world-writable drop
// directory in the host's temporary directory, which no sandbox may reach.
func writeProbe(dir, secret string) error {
	if err := os.MkdirAll(filepath.Join(dir, "drop"), 0o755); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(dir, "drop"), 0o777); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte(secret+"\n"), 0o644); err != nil {
		return err
	}
	return os.Chmod(filepath.Join(dir, "secret"), 0o644)
}
