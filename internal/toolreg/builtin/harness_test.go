package builtin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

const (
	testRole     = "coder@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	testDispatch = "dispatch-42"
	// outsideMarker is the content of the file outside the workspace; no tool may return it.
	outsideMarker = "OUTSIDE-MARKER-7f3a"
	// planted is a secret the tests put into arguments; the redactor removes it.
	planted = "sk-planted-secret-0xdeadbeef"
)

var (
	argsHashRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	basePath   = "PATH=/usr/local/bin:/usr/bin:/bin"
)

func redact(b []byte) []byte { return bytes.ReplaceAll(b, []byte(planted), []byte("[REDACTED]")) }

// recorder is an Auditor that keeps every decision.
type recorder struct {
	mu sync.Mutex
	ds []toolreg.Decision
}

func (r *recorder) ToolCall(_ context.Context, d toolreg.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ds = append(r.ds, d)
}

func (r *recorder) all() []toolreg.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]toolreg.Decision(nil), r.ds...)
}

// fixture is a workspace with escape hatches planted in it, and a view over the built-in
// tools.
type fixture struct {
	ws, outside string
	env         Env
	rec         *recorder
	view        *toolreg.View
	role        string
}

// newFixture lays out
//
//	<tmp>/outside/secret.txt      (outsideMarker)
//	<tmp>/ws/                     the workspace
//	<tmp>/ws/etc     -> /etc
//	<tmp>/ws/out     -> ../outside
//	<tmp>/ws/outfile -> ../outside/secret.txt
//	<tmp>/ws/abs     -> <tmp>/outside (absolute)
//	<tmp>/ws/README.md, src/main.go, src/inner-link -> ../README.md
//
// and checks every audit decision when the test ends.
func newFixture(t testing.TB, g grant.Set) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside"), rec: &recorder{}, role: testRole}
	for _, d := range []string{f.ws, f.outside, filepath.Join(f.ws, "src")} {
		mustDo(t, os.MkdirAll(d, 0o755))
	}
	mustDo(t, os.WriteFile(filepath.Join(f.outside, "secret.txt"), []byte(outsideMarker+"\n"), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "README.md"), []byte("# demo\nhello world\n"), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(f.ws, "src", "main.go"), []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644))
	for link, target := range map[string]string{
		"etc":            "/etc",
		"out":            "../outside",
		"outfile":        "../outside/secret.txt",
		"abs":            f.outside,
		"src/inner-link": "../README.md",
	} {
		mustDo(t, os.Symlink(target, filepath.Join(f.ws, link)))
	}
	f.env = Env{Workspace: f.ws, CommandEnv: []string{basePath, "LANG=C"}}
	f.grant(t, g)
	if tt, ok := t.(*testing.T); ok {
		tt.Cleanup(func() { f.checkDecisions(tt) })
	}
	return f
}

// grant (re)builds the registry and the view with g, keeping the audit recorder.
func (f *fixture) grant(t testing.TB, g grant.Set) {
	t.Helper()
	r := toolreg.NewRegistry()
	mustDo(t, Register(r, f.env))
	f.view = r.For(testDispatch, f.role, g, f.rec, toolreg.WithRedactor(redact))
}

// call runs a tool with args marshalled to JSON.
func (f *fixture) call(t testing.TB, tool string, args any) (toolreg.Result, error) {
	t.Helper()
	b, err := json.Marshal(args)
	mustDo(t, err)
	return f.view.Call(t.Context(), tool, b)
}

// last returns the latest audit decision.
func (f *fixture) last(t testing.TB) toolreg.Decision {
	t.Helper()
	ds := f.rec.all()
	if len(ds) == 0 {
		t.Fatal("no audit decision recorded")
	}
	return ds[len(ds)-1]
}

// checkDecisions asserts what every decision of the test must carry.
func (f *fixture) checkDecisions(t *testing.T) {
	for i, d := range f.rec.all() {
		if d.Role != f.role || d.DispatchID != testDispatch {
			t.Errorf("decision %d: role %q dispatch %q, want %q %q", i, d.Role, d.DispatchID, f.role, testDispatch)
		}
		if !argsHashRE.MatchString(d.ArgsHash) {
			t.Errorf("decision %d: args hash %q is not sha256:hex", i, d.ArgsHash)
		}
		switch d.Decision {
		case toolreg.DecisionAllowed, toolreg.DecisionDenied, toolreg.DecisionError:
		default:
			t.Errorf("decision %d: decision %q", i, d.Decision)
		}
		if d.Tool == "" || d.Reason == "" {
			t.Errorf("decision %d: empty tool or reason: %+v", i, d)
		}
		for _, field := range []string{d.Tool, d.Reason, d.ArgsHash, d.Role} {
			if strings.Contains(field, planted) || strings.Contains(field, outsideMarker) {
				t.Errorf("decision %d holds a secret: %+v", i, d)
			}
		}
	}
}

// wantDecision asserts the latest decision's tool, decision and reason.
func (f *fixture) wantDecision(t testing.TB, tool, decision, reason string) {
	t.Helper()
	d := f.last(t)
	if d.Tool != tool || d.Decision != decision || d.Reason != reason {
		t.Errorf("audit: got tool %q decision %q reason %q, want %q %q %q", d.Tool, d.Decision, d.Reason, tool, decision, reason)
	}
}

// argsHash is what the view should record for args.
func argsHash(t testing.TB, args any) string {
	t.Helper()
	b, err := json.Marshal(args)
	mustDo(t, err)
	sum := sha256.Sum256(redact(b))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// treeHash hashes every path, mode, symlink target and file content under dir, without
// following symbolic links.
func treeHash(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := rel + " " + info.Mode().String()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	mustDo(t, err)
	sort.Strings(lines)
	for _, l := range lines {
		h.Write([]byte(l + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var allTools = grant.Set{Tools: grant.BuiltinTools}
