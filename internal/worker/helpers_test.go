package worker

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/worker/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(dropChildEnv) == "1" {
		dropChildMain() // the signal tests' child; exits
	}
	goleak.VerifyTestMain(m)
}

// testCap is a capability for a fixture: its files (path -> content; a "->" prefix makes a
// symlink) and its capability.yaml ("" for none).
type testCap struct {
	name  string
	yaml  string
	files map[string]string
	exec  []string // paths to archive with mode 0755
}

// fixture is a sandbox layout in a temporary directory.
type fixture struct {
	t        testing.TB
	root     string
	tmp      string
	caps     []testCap
	command  []string
	runtime  string
	model    string // the model runtimes' model
	man      wire.Manifest
	secrets  *os.File
	stdout   bytes.Buffer
	stderr   bytes.Buffer
	maxPatch int64
	// stopped runs the worker as if its stop step had left no process of the agent (there
	// is none without a sandbox).
	stopped bool
}

// newFixture lays out a sandbox with an empty workspace, one capability granting
// "sh -c *", and the given agent script as `sh -c SCRIPT`.
func newFixture(t testing.TB, script string) *fixture {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{wire.BundleDir + "/capabilities", wire.WorkspaceDir, wire.OutDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{
		t:       t,
		root:    root,
		tmp:     t.TempDir(),
		runtime: "exec",
		command: []string{"sh", "-c", script},
		caps: []testCap{{
			name:  "shell",
			yaml:  "commands:\n  - sh -c *\n",
			files: map[string]string{"README.shell": "shell capability\n"},
		}},
		man: wire.Manifest{
			Version:             wire.ManifestVersion,
			DispatchID:          "01JTESTDISPATCH",
			Env:                 map[string]string{"GREETING": "hi"},
			AgentTimeoutSeconds: 60,
			SetupTimeoutSeconds: 60,
		},
	}
}

func (f *fixture) ws(p ...string) string {
	return filepath.Join(append([]string{f.root, wire.WorkspaceDir}, p...)...)
}

func (f *fixture) outPath(p ...string) string {
	return filepath.Join(append([]string{f.root, wire.OutDir}, p...)...)
}

// archive builds a capability's canonical archive with package catalog, as the host does.
func archive(t testing.TB, c testCap) []byte {
	t.Helper()
	var files []catalog.File
	all := map[string]string{}
	for p, s := range c.files {
		all[p] = s
	}
	if c.yaml != "" {
		all[catalog.CapabilityFile] = c.yaml
	}
	for p, s := range all {
		if target, ok := strings.CutPrefix(s, "->"); ok {
			files = append(files, catalog.File{Path: p, Mode: 0o777, LinkTarget: target})
			continue
		}
		mode := int64(0o644)
		for _, e := range c.exec {
			if e == p {
				mode = 0o755
			}
		}
		files = append(files, catalog.File{Path: p, Mode: mode, Size: int64(len(s)), Data: []byte(s)})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	b, err := catalog.Archive(files)
	if err != nil {
		t.Fatalf("archive %s: %v", c.name, err)
	}
	return b
}

// layOut places a capability's files at capabilities/NAME as the host does.
func (f *fixture) layOut(name string, files []catalog.File) {
	f.t.Helper()
	dir := filepath.Join(f.root, wire.CapabilityFilesDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		f.t.Fatal(err)
	}
	defer root.Close()
	for _, file := range files {
		if file.Path == catalog.CapabilityFile {
			continue
		}
		if err := catalog.Place(root, file, 0o700, 0o500); err != nil {
			f.t.Fatal(err)
		}
	}
}

// write writes the bundle: capability archives, the subagent document, the manifest.
// Manifest fields the test set are kept; the rest are derived.
func (f *fixture) write() {
	t := f.t
	t.Helper()
	var pins []catalog.Pin
	var union []string
	f.man.Capabilities = nil
	for _, c := range f.caps {
		b := archive(t, c)
		d := digest.Sum(b)
		if err := os.WriteFile(filepath.Join(f.root, wire.BundleDir, wire.CapabilityPath(d)), b, 0o444); err != nil {
			t.Fatal(err)
		}
		pins = append(pins, catalog.Pin{Name: c.name, Digest: d})
		f.man.Capabilities = append(f.man.Capabilities, wire.Bundle{Name: c.name, Digest: d, Path: wire.CapabilityPath(d)})
		files, err := catalog.ReadArchive(b, catalog.Limits{MaxTotalSize: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		f.layOut(c.name, files)
		if c.yaml != "" {
			g, err := catalog.ParseCapabilityDoc(catalog.CapabilityFile, []byte(c.yaml), files)
			if err != nil {
				t.Fatalf("capability %s: %v", c.name, err)
			}
			union = append(union, g.Commands...)
		}
	}
	doc, err := catalog.SubagentDoc{Runtime: f.runtime, Model: f.model, SystemPrompt: "You are a test.", Command: f.command, Capabilities: pins}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.root, wire.BundleDir, wire.SubagentFile), doc, 0o444); err != nil {
		t.Fatal(err)
	}
	f.man.Subagent = wire.Bundle{Name: "fixer", Digest: digest.Sum(doc), Path: wire.SubagentFile}
	f.man.Runtime = f.runtime
	f.man.Command = f.command
	if f.man.Grants.Commands == nil {
		f.man.Grants.Commands = union
	}
	f.writeManifest()
}

func (f *fixture) writeManifest() {
	f.t.Helper()
	b, err := f.man.Marshal()
	if err != nil {
		f.t.Fatalf("marshal manifest: %v", err)
	}
	if err := os.WriteFile(filepath.Join(f.root, wire.BundleDir, wire.ManifestFile), b, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// withSecrets passes obj (raw text) as the secrets descriptor.
func (f *fixture) withSecrets(obj string) {
	f.t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := w.WriteString(obj); err != nil {
		f.t.Fatal(err)
	}
	w.Close()
	f.secrets = r
}

// run runs the worker and returns its exit code and parsed result.
func (f *fixture) run() (int, wire.Result) {
	t := f.t
	t.Helper()
	code := run(t.Context(), options{
		Root:             f.root,
		TempDir:          f.tmp,
		SecretsFile:      f.secrets,
		Stdout:           &f.stdout,
		Stderr:           &f.stderr,
		testOnlyMaxPatch: f.maxPatch,
		testOnlyStopped:  f.stopped,
	})
	if code != 0 {
		t.Fatalf("worker exit code %d; stderr:\n%s", code, f.stderr.String())
	}
	b, err := os.ReadFile(f.outPath(wire.ResultFile))
	if err != nil {
		t.Fatalf("read result: %v", err)
	}
	res, err := wire.ParseResult(b)
	if err != nil {
		t.Fatalf("the worker wrote a result ParseResult refuses: %v\n%s", err, b)
	}
	return code, res
}

// git runs git in dir with an isolated configuration and returns its stdout.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// initRepo makes dir a git checkout with one commit holding files.
func initRepo(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "initial")
}

// cloneRepo makes a fresh checkout of src's HEAD.
func cloneRepo(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "clone")
	git(t, filepath.Dir(dst), "clone", "-q", src, dst)
	return dst
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func phaseNames(res wire.Result) []string {
	var names []string
	for _, p := range res.Phases {
		names = append(names, p.Name)
	}
	return names
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
