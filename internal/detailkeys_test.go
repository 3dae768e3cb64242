package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestDetailKeysHaveOneHome keeps the audit details' keys in one place (one home per
// vocabulary): outside internal/audit/entry, no shipped code reads or writes an entry's
// Details by a string literal (`Details["repo"]`); it names the key by entry's constant
// (`Details[entry.KeyRepo]`), so a reader and the writers cannot drift apart on a spelling and
// the keys a verifier depends on are listed once. Tests may spell keys out: they pin the bytes.
func TestDetailKeysHaveOneHome(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == filepath.Join("audit", "entry") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ix, ok := n.(*ast.IndexExpr)
			if !ok {
				return true
			}
			sel, ok := ix.X.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Details" {
				return true
			}
			if lit, ok := ix.Index.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				t.Errorf("%s: Details[%s]: name the key by its constant in internal/audit/entry", fset.Position(ix.Pos()), lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
