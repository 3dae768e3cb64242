//go:build ignore

// testclock prints how much of the test suite runs on the wall clock: time.Sleep calls in
// tests (and those of 100 ms or more, with and without a comment saying why), polling
// deadlines, literal second and minute durations, t.Parallel calls and testing/synctest
// bubbles. A sleep inside a synctest bubble moves its fake clock: it is counted apart, not as
// a time.Sleep. `make test-clock` runs it; docs/benchmarks-history.md keeps its figures over time.
//
//	go run scripts/testclock.go [-list] [DIR]
//
// -list prints every fixed sleep of 100 ms or more with its place, so each can be replaced by
// an event or given its comment.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// longSleep is where a fixed sleep must say why nothing else works.
const longSleep = 100 * time.Millisecond

type census struct {
	files, sleeps, longSleeps, unexplained int
	deadlines, literalDurations            int
	parallel, synctest, bubbleSleeps       int
	long                                   []string
}

func main() {
	list := flag.Bool("list", false, "print each fixed sleep of 100 ms or more")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	var c census
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".cache", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return c.file(path)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testclock:", err)
		os.Exit(1)
	}
	fmt.Printf("test files                         %d\n", c.files)
	fmt.Printf("time.Sleep calls                   %d\n", c.sleeps)
	fmt.Printf("  of 100 ms or more                %d\n", c.longSleeps)
	fmt.Printf("  of 100 ms or more, no why        %d\n", c.unexplained)
	fmt.Printf("polling deadlines                  %d\n", c.deadlines)
	fmt.Printf("literal second/minute durations    %d\n", c.literalDurations)
	fmt.Printf("t.Parallel calls                   %d\n", c.parallel)
	fmt.Printf("synctest bubbles                   %d\n", c.synctest)
	fmt.Printf("  sleeps on a bubble's fake clock  %d\n", c.bubbleSleeps)
	if *list {
		sort.Strings(c.long)
		for _, l := range c.long {
			fmt.Println(l)
		}
	}
}

func (c *census) file(path string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return err
	}
	c.files++
	// Comment lines by line number: a long sleep is explained by a comment on its line or
	// within the three lines above it.
	commented := map[int]bool{}
	for _, g := range f.Comments {
		for _, cm := range g.List {
			commented[fset.Position(cm.Pos()).Line] = true
		}
	}
	// A synctest bubble's sleeps move its fake clock, not the wall clock: they are counted
	// apart (bubbleSleeps), never as fixed sleeps.
	var bubbles [][2]token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && (isSel(call.Fun, "synctest", "Test") || isSel(call.Fun, "synctest", "Run")) {
			bubbles = append(bubbles, [2]token.Pos{call.Pos(), call.End()})
		}
		return true
	})
	inBubble := func(p token.Pos) bool {
		for _, b := range bubbles {
			if p >= b[0] && p < b[1] {
				return true
			}
		}
		return false
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if isSel(n.Fun, "time", "Sleep") && inBubble(n.Pos()) {
				c.bubbleSleeps++
				return true
			}
			c.call(fset, n, path, commented)
		case *ast.BinaryExpr:
			if n.Op == token.MUL && (isUnit(n.X, "Second", "Minute") || isUnit(n.Y, "Second", "Minute")) {
				c.literalDurations++
			}
		}
		return true
	})
	return nil
}

func (c *census) call(fset *token.FileSet, n *ast.CallExpr, path string, commented map[int]bool) {
	switch {
	case isSel(n.Fun, "time", "Sleep") && len(n.Args) == 1:
		c.sleeps++
		d, ok := constDuration(n.Args[0])
		if !ok || d < longSleep {
			return
		}
		c.longSleeps++
		line := fset.Position(n.Pos()).Line
		why := commented[line] || commented[line-1] || commented[line-2] || commented[line-3]
		if !why {
			c.unexplained++
		}
		mark := "why"
		if !why {
			mark = "NO WHY"
		}
		c.long = append(c.long, fmt.Sprintf("%s:%d\t%s\t%s", path, line, d, mark))
	case isSel(n.Fun, "synctest", "Test") || isSel(n.Fun, "synctest", "Run"):
		c.synctest++
	case isSelName(n.Fun, "Parallel") && len(n.Args) == 0:
		c.parallel++
	case isSelName(n.Fun, "Add") && len(n.Args) == 1:
		// time.Now().Add(d): a deadline a loop polls against.
		if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
			if inner, ok := sel.X.(*ast.CallExpr); ok && isSel(inner.Fun, "time", "Now") {
				c.deadlines++
			}
		}
	}
}

func isSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

func isSelName(e ast.Expr, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}

func isUnit(e ast.Expr, names ...string) bool {
	for _, n := range names {
		if isSel(e, "time", n) {
			return true
		}
	}
	return false
}

var units = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// constDuration folds a literal duration: time.Second, 3 * time.Second, 500*time.Millisecond,
// time.Duration(2) * time.Second. Anything else is not a fixed sleep it can size.
func constDuration(e ast.Expr) (time.Duration, bool) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return constDuration(e.X)
	case *ast.SelectorExpr:
		if id, ok := e.X.(*ast.Ident); ok && id.Name == "time" {
			d, ok := units[e.Sel.Name]
			return d, ok
		}
	case *ast.BasicLit:
		if e.Kind == token.INT {
			n, err := strconv.ParseInt(e.Value, 0, 64)
			return time.Duration(n), err == nil
		}
	case *ast.CallExpr:
		if isSel(e.Fun, "time", "Duration") && len(e.Args) == 1 {
			return constDuration(e.Args[0])
		}
	case *ast.BinaryExpr:
		x, okx := constDuration(e.X)
		y, oky := constDuration(e.Y)
		if !okx || !oky {
			return 0, false
		}
		switch e.Op {
		case token.MUL:
			return x * y, true
		case token.QUO:
			if y != 0 {
				return x / y, true
			}
		case token.ADD:
			return x + y, true
		}
	}
	return 0, false
}
