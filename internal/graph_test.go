package internal_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// module is the import-path prefix of agora's own packages; the tables in this package name
// them without it ("internal/worker").
const module = "github.com/agora-dev/agora/"

// listed is one package of the build graph as `go list -deps -json` reports it.
type listed struct {
	ImportPath string
	Standard   bool
	Imports    []string // non-test imports, resolved
	GoFiles    []string // non-test Go files; none for a directory of tests only
	Module     *struct{ Path string }
}

// graph is the non-test import graph of every package in the module and everything they
// link, loaded once with a single `go list -deps` and shared by the tests of this package.
type graph struct {
	pkgs map[string]*listed
}

var loadGraphOnce = sync.OnceValues(func() (*graph, error) {
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports,GoFiles,Module", module+"...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s...: %w%s", module, err, stderrOf(err))
	}
	g := &graph{pkgs: map[string]*listed{}}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		g.pkgs[p.ImportPath] = &p
	}
	return g, nil
})

func loadGraph(t *testing.T) *graph {
	t.Helper()
	g, err := loadGraphOnce()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// own reports whether path is a package of this module.
func (g *graph) own(path string) bool {
	p := g.pkgs[path]
	return p != nil && p.Module != nil && p.Module.Path+"/" == module
}

// under lists the module's packages whose path, without the module prefix, starts with dir/.
func (g *graph) under(dir string) []string {
	var out []string
	for path := range g.pkgs {
		if g.own(path) && strings.HasPrefix(path, module+dir+"/") {
			out = append(out, strings.TrimPrefix(path, module))
		}
	}
	slices.Sort(out)
	return out
}

// matcher returns whether a package path is what target names: "internal/x" is the module's
// package, "internal/x/..." every module package beneath internal/x, anything else a
// third-party package or the whole module of that path ("modernc.org/sqlite").
func (g *graph) matcher(target string) func(path string) bool {
	if dir, ok := strings.CutSuffix(target, "/..."); ok && strings.HasPrefix(dir, "internal/") {
		return func(path string) bool { return g.own(path) && strings.HasPrefix(path, module+dir+"/") }
	}
	if strings.HasPrefix(target, "internal/") {
		return func(path string) bool { return path == module+target }
	}
	return func(path string) bool {
		p := g.pkgs[path]
		return path == target || (p != nil && p.Module != nil && p.Module.Path == target)
	}
}

// exists reports whether target still names something, so a row naming a moved or renamed
// package fails instead of passing forever. A third-party target not linked by any package of
// the module counts if the module graph still requires it, or if it is a package go list finds
// (one no package of the module links any more, such as k8s.io/client-go/kubernetes/scheme).
func (g *graph) exists(t *testing.T, target string) bool {
	match := g.matcher(target)
	for path := range g.pkgs {
		if match(path) {
			return true
		}
	}
	if strings.HasPrefix(target, "internal/") {
		return false
	}
	if slices.Contains(requiredModules(t), target) {
		return true
	}
	return exec.Command("go", "list", target).Run() == nil
}

var requiredModulesOnce = sync.OnceValues(func() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}}", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m all: %w%s", err, stderrOf(err))
	}
	return strings.Fields(string(out)), nil
})

func requiredModules(t *testing.T) []string {
	t.Helper()
	mods, err := requiredModulesOnce()
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// chain returns the shortest import chain from the package from to one that target names,
// from first, or nil when from links nothing target names.
func (g *graph) chain(t *testing.T, from, target string) []string {
	match := g.matcher(target)
	parent := map[string]string{from: ""}
	for queue := []string{from}; len(queue) > 0; queue = queue[1:] {
		cur := queue[0]
		if match(cur) {
			var c []string
			for p := cur; p != ""; p = parent[p] {
				c = append(c, p)
			}
			slices.Reverse(c)
			return c
		}
		for _, imp := range g.imports(t, cur) {
			if _, seen := parent[imp]; !seen {
				parent[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// closure lists what from links, itself included, as `go list -deps` would: the module's
// packages by import path and every other module by its module path; the standard library is
// left out.
func (g *graph) closure(t *testing.T, from string) []string {
	seen := map[string]bool{from: true}
	set := map[string]bool{}
	for queue := []string{from}; len(queue) > 0; queue = queue[1:] {
		p := g.pkgs[queue[0]]
		switch {
		case p.Standard:
		case g.own(p.ImportPath):
			set[p.ImportPath] = true
		case p.Module != nil:
			set[p.Module.Path] = true
		default:
			t.Fatalf("%s is neither standard nor in a module", p.ImportPath)
		}
		for _, imp := range g.imports(t, p.ImportPath) {
			if !seen[imp] {
				seen[imp] = true
				queue = append(queue, imp)
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// imports are path's imports that are packages; "C" is cgo's pseudo-package.
func (g *graph) imports(t *testing.T, path string) []string {
	p := g.pkgs[path]
	if p == nil {
		t.Fatalf("%s is not in the graph go list returned", path)
	}
	var out []string
	for _, imp := range p.Imports {
		if imp == "C" {
			continue
		}
		if g.pkgs[imp] == nil {
			t.Fatalf("%s imports %s, which go list did not return", path, imp)
		}
		out = append(out, imp)
	}
	return out
}
