package cli_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// maxFuncLines bounds every function of this package and the packages below it (cmdutil and
// one per noun), tests included: a command that needs
// more moves its logic into the package it belongs to, and a printer splits by section.
const maxFuncLines = 100

// TestFunctionLength keeps the CLI thin: no function over maxFuncLines lines.
func TestFunctionLength(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files here (%v)", err)
	}
	below, err := filepath.Glob("*/*.go")
	if err != nil || len(below) == 0 {
		t.Fatalf("no Go files below here (%v)", err)
	}
	files = append(files, below...)
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines; at most %d", file, start.Line, fd.Name.Name, n, maxFuncLines)
			}
		}
	}
}
