package internal_test

//go:generate go test -run TestArchitectureLayers -update .

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// The layer table in docs/ARCHITECTURE.md sits between these two lines; everything outside them
// is written by hand.
const (
	layersBegin = "<!-- BEGIN layer table: generated from go list by `go generate ./internal`; do not edit -->\n"
	layersEnd   = "<!-- END layer table -->\n"
)

// layerWidth is where a row wraps; continuation lines are indented past the layer number.
const layerWidth = 100

// layerTable renders the module's documented packages by layer: a package's layer is the
// longest import path from it down to a package that imports none of the module's, counted in
// the module's own non-test packages. Marks in parentheses after a name: * in
// internal/worker's closure (it runs inside the sandbox), + one of those that host-only
// code links too (both sides link it), o in internal/mcpserver's closure.
func layerTable(t *testing.T, g *graph) string {
	docs := g.documented()
	layer := map[string]int{}
	var depth func(rel string) int
	depth = func(rel string) int {
		if d, ok := layer[rel]; ok {
			return d
		}
		d := 0
		for _, imp := range g.imports(t, module+rel) {
			if g.own(imp) {
				d = max(d, depth(strings.TrimPrefix(imp, module))+1)
			}
		}
		layer[rel] = d
		return d
	}
	rows := map[int][]string{}
	worker, mcp := closureSet(t, g, "internal/worker"), closureSet(t, g, "internal/mcpserver")
	shared := hostLinked(t, g, docs, worker)
	for _, rel := range docs {
		var marks string
		if worker[rel] {
			marks += "*"
		}
		if shared[rel] {
			marks += "+"
		}
		if mcp[rel] {
			marks += "o"
		}
		name := strings.TrimPrefix(rel, "internal/")
		if marks != "" {
			name += "(" + marks + ")"
		}
		rows[depth(rel)] = append(rows[depth(rel)], name)
	}
	var b strings.Builder
	b.WriteString("```\n")
	for _, n := range slices.Backward(slices.Sorted(maps.Keys(rows))) {
		prefix := fmt.Sprintf("%-3d", n)
		line := prefix
		for i, name := range rows[n] { // docs is sorted, so each row is
			if i > 0 && len(line)+2+len(name) > layerWidth {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = strings.Repeat(" ", len(prefix))
			} else if i > 0 {
				line += "  "
			}
			line += name
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// closureSet is the module's packages in from's closure, without the module prefix.
func closureSet(t *testing.T, g *graph, from string) map[string]bool {
	set := map[string]bool{}
	for _, p := range g.closure(t, module+from) {
		if rel, ok := strings.CutPrefix(p, module); ok && g.own(p) {
			set[rel] = true
		}
	}
	return set
}

// hostLinked are the packages of the worker's closure that host-only code links too: those
// reachable from a documented package outside that closure without passing through
// internal/worker itself, which the CLI links only to run it in the sandbox.
func hostLinked(t *testing.T, g *graph, docs []string, worker map[string]bool) map[string]bool {
	seen := map[string]bool{module + "internal/worker": true}
	var queue []string
	for _, rel := range docs {
		if !worker[rel] {
			seen[module+rel] = true
			queue = append(queue, module+rel)
		}
	}
	set := map[string]bool{}
	for ; len(queue) > 0; queue = queue[1:] {
		if rel, ok := strings.CutPrefix(queue[0], module); ok && worker[rel] {
			set[rel] = true
		}
		for _, imp := range g.imports(t, queue[0]) {
			if !seen[imp] && g.own(imp) {
				seen[imp] = true
				queue = append(queue, imp)
			}
		}
	}
	return set
}

// TestArchitectureLayers fails when the layer table in docs/ARCHITECTURE.md is not the one the
// import graph gives; with -update (what `go generate ./internal` runs) it rewrites the table.
func TestArchitectureLayers(t *testing.T) {
	g := loadGraph(t)
	doc := readArchDoc(t)
	head, rest, ok1 := strings.Cut(doc, layersBegin)
	committed, tail, ok2 := strings.Cut(rest, layersEnd)
	if !ok1 || !ok2 {
		t.Fatalf("docs/ARCHITECTURE.md has no layer table between the lines\n%s...\n%sput them back around the table, then run `go generate ./internal`",
			layersBegin, layersEnd)
	}
	want := layerTable(t, g)
	if *update {
		if err := os.WriteFile(archDoc, []byte(head+layersBegin+want+layersEnd+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if committed != want {
		t.Errorf("the layer table in docs/ARCHITECTURE.md is not the import graph's (+ the graph's row, - the committed one):\n%s"+
			"run `go generate ./internal` (or `go test ./internal -run Architecture -update`) and commit docs/ARCHITECTURE.md",
			lineDiff(strings.Split(committed, "\n"), strings.Split(want, "\n")))
	}
}
