package internal_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// otherVocabularies are packages whose words look like a state or a reason of
// internal/lifecycle but belong to another closed set, each with why.
var otherVocabularies = []struct{ dir, why string }{
	{"internal/verdict", "a verdict's reason (timeout) is the verify gate command's, recorded in the verdict, not a dispatch's failure reason"},
}

// TestLifecycleWordsHaveOneHome keeps the states of dispatches, tasks and runs and the reasons
// they fail in one place (internal/lifecycle): outside it, no shipped code under internal/ or
// cmd/ spells one as a string literal where a state or a reason is meant. A literal counts when
// it is compared with, switched on, assigned or returned as, or keyed by something named for a
// state or a reason (State, state, TaskStates, Reason, KeyReason, ...); when it is passed to a
// parameter of its own package's function so named; or when one list or map literal holds two
// or more of the words (a hand-written list of states, which a new state would miss). The same
// word elsewhere ("running" in a message, "timeout" as a YAML key, "denied" as a tool decision)
// is another word. Tests may spell the words out: they pin the bytes.
func TestLifecycleWordsHaveOneHome(t *testing.T) {
	for _, root := range []string{".", "../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if path == "lifecycle" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			rel := filepath.ToSlash(filepath.Join("internal", path))
			if root != "." {
				rel = strings.TrimPrefix(filepath.ToSlash(path), "../")
			}
			if slices.ContainsFunc(otherVocabularies, func(o struct{ dir, why string }) bool { return o.dir == rel }) {
				return nil
			}
			for _, f := range lifecycleWordsIn(t, path) {
				t.Error(f)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestLifecycleWordsHaveOneHome_Catches plants each kind of literal the check finds, and some
// it must leave alone, and checks the findings.
func TestLifecycleWordsHaveOneHome_Catches(t *testing.T) {
	dir := t.TempDir()
	src := `package p

type rec struct{ State, Reason, Detail, Phase string }

func skip(t *rec, ancestorState string) {}
func ended() string                      { return "" }
func runState(n int) string               { return "failed" } // finding 1

func f(r *rec, s string, m map[string]int) {
	if r.State == "needs_input" { // finding 2
	}
	switch r.Reason {
	case "worker-failed": // finding 3
	}
	r.Reason = "lost"                 // finding 4
	_ = rec{State: "succeeded"}       // finding 5
	_ = m["ready"]                    // not state-named: left alone
	var TaskStates map[string]int
	_ = TaskStates["ready"]           // finding 6
	skip(r, "cancelled")              // finding 7
	_ = []string{"pending", "running"} // findings 8, 9
	r.Detail = "cancelled"            // a detail, not a state
	r.Phase = "running"               // a phase, not a state
	_ = "failed: " + s                // a message
	if s == "timeout" {               // s is not named for a state
	}
}

const reasonBudget = "budget-exceeded" // finding 10

const (
	TaskParked     = "pending" // finding 11
	ApprovalPending = "pending" // another vocabulary
)
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := lifecycleWordsIn(t, dir)
	if len(got) != 11 {
		t.Errorf("got %d findings, want 11:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, w := range []string{`"needs_input"`, `"worker-failed"`, `"lost"`, `"succeeded"`, `"cancelled"`, `"pending"`, `"running"`, `"budget-exceeded"`} {
		if !slices.ContainsFunc(got, func(f string) bool { return strings.Contains(f, w) }) {
			t.Errorf("the planted %s was not found", w)
		}
	}
}

var (
	stateNamed  = regexp.MustCompile(`^(?:state|states|status)$|(?:State|States|Status)$`)
	reasonNamed = regexp.MustCompile(`^(?:reason|reasons)$|(?:Reason|Reasons)$`)
	// declNamed is a constant or variable declared for a state or a reason: so named anywhere
	// in its name, or named for a dispatch, a task or a run first (TaskPending, RunFailed).
	declNamed = regexp.MustCompile(`(?i:state|reason|status)|^(?:[Tt]ask|[Rr]un|[Dd]ispatch)[A-Z]`)
)

// lifecycleWords are the states and the reasons, each word mapped to whether it is a state
// and whether it is a reason ("cancelled" is both).
func lifecycleWords() map[string][2]bool {
	words := map[string][2]bool{}
	for _, s := range slices.Concat(lifecycle.DispatchStates(), lifecycle.TaskStates(), lifecycle.RunStates()) {
		w := words[s]
		w[0] = true
		words[s] = w
	}
	for _, r := range slices.Concat(lifecycle.Reasons(), lifecycle.TaskReasons()) {
		w := words[r]
		w[1] = true
		words[r] = w
	}
	return words
}

// lifecycleWordsIn returns the findings in the shipped Go files of dir, one line each.
func lifecycleWordsIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// The parameter names of the package's functions and methods, by name: a call is matched
	// by its function's name, so a literal passed as a state-named parameter is found.
	params := map[string][][]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				params[fd.Name.Name] = append(params[fd.Name.Name], paramNames(fd.Type.Params))
			}
		}
	}
	c := &wordCheck{fset: fset, words: lifecycleWords(), params: params, seen: map[token.Pos]bool{}}
	for _, f := range files {
		c.file(f)
	}
	return c.found
}

// paramNames lists a parameter list's names in order, "" for an unnamed one.
func paramNames(l *ast.FieldList) []string {
	var out []string
	for _, p := range l.List {
		if len(p.Names) == 0 {
			out = append(out, "")
		}
		for _, n := range p.Names {
			out = append(out, n.Name)
		}
	}
	return out
}

type wordCheck struct {
	fset   *token.FileSet
	words  map[string][2]bool
	params map[string][][]string
	seen   map[token.Pos]bool
	found  []string
}

// word is lit's value when lit is a string literal that spells a state or a reason.
func (c *wordCheck) word(e ast.Expr) (string, [2]bool, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", [2]bool{}, false
	}
	v, err := strconv.Unquote(lit.Value)
	if err != nil {
		return "", [2]bool{}, false
	}
	k, ok := c.words[v]
	return v, k, ok
}

// flag records lit when name says it holds a state (and lit spells one) or a reason (and lit
// spells one).
func (c *wordCheck) flag(lit ast.Expr, name, how string) {
	v, k, ok := c.word(lit)
	if !ok {
		return
	}
	if (k[0] && stateNamed.MatchString(name)) || (k[1] && reasonNamed.MatchString(name)) {
		c.report(lit, v, how+" "+name)
	}
}

func (c *wordCheck) report(lit ast.Expr, v, how string) {
	if c.seen[lit.Pos()] {
		return
	}
	c.seen[lit.Pos()] = true
	c.found = append(c.found, fmt.Sprintf("%s: %q %s: name it by its constant in internal/lifecycle",
		c.fset.Position(lit.Pos()), v, how))
}

// nameOf is the name an expression is known by: an identifier, a field or a package member,
// an index (Details[entry.KeyReason] is a reason), or the one argument of a conversion or
// accessor (string(r.Reason)).
func nameOf(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.IndexExpr:
		return nameOf(x.Index)
	case *ast.CallExpr:
		if len(x.Args) == 1 {
			return nameOf(x.Args[0])
		}
	case *ast.ParenExpr:
		return nameOf(x.X)
	case *ast.StarExpr:
		return nameOf(x.X)
	}
	return ""
}

func (c *wordCheck) file(f *ast.File) {
	var funcs []*ast.FuncDecl // the enclosing function declarations, innermost last
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncDecl:
			funcs = append(funcs, x)
		case *ast.BinaryExpr:
			if x.Op == token.EQL || x.Op == token.NEQ {
				c.flag(x.Y, nameOf(x.X), "compared with")
				c.flag(x.X, nameOf(x.Y), "compared with")
			}
		case *ast.SwitchStmt:
			if x.Tag != nil {
				for _, s := range x.Body.List {
					for _, e := range s.(*ast.CaseClause).List {
						c.flag(e, nameOf(x.Tag), "a case of")
					}
				}
			}
		case *ast.AssignStmt:
			if len(x.Lhs) == len(x.Rhs) {
				for i := range x.Lhs {
					c.flag(x.Rhs[i], nameOf(x.Lhs[i]), "assigned to")
				}
			}
		case *ast.ValueSpec:
			for i, v := range x.Values {
				if i >= len(x.Names) {
					break
				}
				w, _, ok := c.word(v)
				if ok && (declNamed.MatchString(x.Names[i].Name) || (x.Type != nil && declNamed.MatchString(nameOf(x.Type)))) {
					c.report(v, w, "declared as "+x.Names[i].Name)
				}
			}
		case *ast.KeyValueExpr:
			c.flag(x.Value, nameOf(x.Key), "keyed by")
		case *ast.IndexExpr:
			c.flag(x.Index, nameOf(x.X), "an index of")
		case *ast.ReturnStmt:
			if len(funcs) > 0 {
				fn := funcs[len(funcs)-1]
				if fn.Body != nil && fn.Body.Pos() <= x.Pos() && x.End() <= fn.Body.End() {
					for _, r := range x.Results {
						c.flag(r, fn.Name.Name, "returned by")
					}
				}
			}
		case *ast.CallExpr:
			var name string
			switch fn := x.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			for _, ps := range c.params[name] {
				for i, a := range x.Args {
					if len(ps) > 0 {
						c.flag(a, ps[min(i, len(ps)-1)], "passed as")
					}
				}
			}
		case *ast.CompositeLit:
			var states, reasons []ast.Expr
			for _, e := range x.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					e = kv.Key
				}
				if _, k, ok := c.word(e); ok {
					if k[0] {
						states = append(states, e)
					}
					if k[1] {
						reasons = append(reasons, e)
					}
				}
			}
			for _, l := range [][]ast.Expr{states, reasons} {
				if len(l) >= 2 {
					for _, e := range l {
						w, _, _ := c.word(e)
						c.report(e, w, "listed by hand with another")
					}
				}
			}
		}
		return true
	})
}
