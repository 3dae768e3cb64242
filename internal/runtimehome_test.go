package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/runtimes"
)

// The registry (one home per vocabulary): a runtime is its directory under
// internal/runtime and its line in runtimes.All; the worker's table of adapters is generated
// from that line. These two files may name every runtime.
const (
	registryFile = "internal/runtime/runtimes/runtimes.go"
	adapterTable = "internal/runtime/runtimes/adapters/adapters_gen.go"
)

// runtimeUses are the files outside a runtime's directory that name it (import one of its
// packages, or hold its name as a string literal; comments and tests do not count) and
// why: each is a feature about that runtime or a use of its package as a library, none is
// a step of running a runtime, so a new runtime needs none of them. A new line here is a
// runtime leaking out of its directory; say why it must.
var runtimeUses = map[string]map[string]string{
	"exec": {
		"internal/runtime/claudert/run.go":                    "claudert starts claude through execrt, the process runner",
		"internal/runtime/codexrt/codexadapter/codexshell.go": "codex's default shell is looked up with execrt, the process runner",
		"internal/runtime/codexrt/run.go":                     "the word: codex's exec subcommand",
		"internal/toolreg/builtin/command.go":                 "run_command runs its command through execrt, the process runner",
		"internal/worker/capture.go":                          "the worker runs git through execrt, the process runner",
		"internal/worker/overlay.go":                          "the worker runs the overlay's commands through execrt, the process runner",
		"internal/worker/prewarm.go":                          "a warm slot's warm-up runs a no-op exec dispatch",
		"internal/runtime/runtimes/adapters/adapters_exec.go": "the exec-only worker's table of adapters: exec's alone (ADR 0035)",
		"internal/grant/suggest/gather.go":                    "a learn dispatch's evidence of an exec subagent is its fixed command",
		"internal/grant/suggest/evidence.go":                  `the word: the audit's tool name "exec" of a fixed command`,
		"internal/grant/suggest/propose.go":                   `the word: the shell builtin exec`,
		"internal/dispatch/learn.go":                          `the word: the audit's tool name "exec" of a fixed command`,
		"internal/cmdread/git.go":                             "the word: git's --exec options",
		"internal/cmdread/programs.go":                        "the word: find's -exec",
		"internal/cmdread/read.go":                            "the word: an option named exec",
	},
	"claude-code": {
		"internal/catalog/ccimport/mapping.go": "importing Claude Code subagents maps Claude Code's tools (claudert.MapTool)",
		"internal/catalog/ccimport/prepare.go": "importing Claude Code subagents makes claude-code subagents",
		"internal/grant/suggest/evidence.go":   "suggest reads Claude Code's tool names in a learn transcript (claudert.AgoraTool)",
		"bench/claudebench/main.go":            "the Claude Code benchmark runs the fake Messages API (claudert/anthropictest)",
	},
	"openai": {
		"internal/modelgw/trace.go":              "the word: the gateway's API names its provider openai in a span",
		"internal/runtime/runtimes/spec/spec.go": "the word: the model API openai (spec.APIOpenAI), which codex speaks too",
	},
	"codex": {},
}

// TestRuntimeHome: no runtime is named outside its directory, the registry and the
// generated table, except by the uses runtimeUses lists; each listed use still exists.
func TestRuntimeHome(t *testing.T) {
	dirs := registryDirs(t)
	names := runtimes.Names()
	if len(dirs) != len(names) {
		t.Fatalf("%s lists %d descriptions, runtimes.Names %d", registryFile, len(dirs), len(names))
	}
	for _, n := range names {
		if _, ok := runtimeUses[n]; !ok {
			t.Errorf("runtime %q has no entry in runtimeUses", n)
		}
	}
	found := map[string]map[string]bool{} // runtime -> file -> named
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, "../"))
		if d.IsDir() {
			if b := d.Name(); b == "testdata" || strings.HasPrefix(b, ".") && p != ".." || b == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || rel == registryFile || rel == adapterTable {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for i, n := range names {
			dir := dirs[i]
			if rel == dir || strings.HasPrefix(rel, dir+"/") {
				continue
			}
			if namesRuntime(f, module+dir, n) {
				if found[n] == nil {
					found[n] = map[string]bool{}
				}
				found[n][rel] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		for _, file := range slices.Sorted(maps.Keys(found[n])) {
			if _, ok := runtimeUses[n][file]; !ok {
				t.Errorf("%s names the %s runtime (its package or its name), outside its directory and the registry: a new runtime would need a line there too; move it into the runtime's directory (or read it off its description), or list it in runtimeUses with why", file, n)
			}
		}
		for file := range runtimeUses[n] {
			if !found[n][file] {
				t.Errorf("runtimeUses lists %s for %s, which no longer names it: remove the line", file, n)
			}
		}
	}
}

// namesRuntime reports whether f imports a package in dir (an import path) or holds name as
// a string literal.
func namesRuntime(f *ast.File, dir, name string) bool {
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	named := false
	ast.Inspect(f, func(n ast.Node) bool {
		if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
			if s, err := strconv.Unquote(l.Value); err == nil && s == name {
				named = true
			}
		}
		return !named
	})
	return named
}

// registryDirs returns, in runtimes.All's order, each runtime's directory (relative to the
// module): the parent of the description runtimes.All lists (<dir>/<name>def).
func registryDirs(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../"+registryFile, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		imports[path.Base(p)] = p
	}
	var dirs []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "All" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && sel.Sel.Name == "Runtime" && imports[id.Name] != "" {
				dirs = append(dirs, strings.TrimPrefix(path.Dir(imports[id.Name]), module))
			}
			return false
		})
	}
	return dirs
}
