package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// hostReaders are the host-side packages that handle a dispatch's stage directory, which the
// sandbox shares with the agent. They read files only through internal/sandboxfs (no symlink
// on the path, regular files, capped, hash-checked); any other file read here is a way back to
// the host-file read of issue #11 and must be listed in readAllowed with its reason.
var hostReaders = []string{"dispatch", "orch/dispatchexec", "cli"}

// fileReads are the calls that open or read a file by path.
var fileReads = map[string]bool{
	"os.Open": true, "os.OpenFile": true, "os.ReadFile": true, "os.ReadDir": true, "os.OpenRoot": true,
	"os.DirFS": true, "filepath.WalkDir": true, "filepath.Walk": true,
	"capped.NoFollow": true, "capped.ReadFile": true,
}

// readAllowed lists every other file read in hostReaders: "file:function: call" and why it
// never touches a path the sandbox can write.
var readAllowed = map[string]string{
	"dispatch/process.go:processStart: os.ReadFile":  "/proc/PID/stat: the kernel's file",
	"dispatch/supervise.go:newLogSink: os.OpenFile":  "creates the supervisor's own log, write-only",
	"dispatch/stage.go:hold: os.OpenFile":            "creates dispatches/.held/<id>, the host's index of stages to release, never bound into a sandbox",
	"dispatch/stage.go:heldStages: os.ReadDir":       "lists dispatches/.held/, the host's own index",
	"dispatch/stage.go:handOver: filepath.WalkDir":   "chowns the stage to the sandbox uid before the sandbox exists (Lchown: no link followed)",
	"cli/dispatch_read.go:followLog: os.Open":        "the supervisor's live log in the stage directory, which is never bound into the sandbox",
	"cli/dispatch.go:detachSupervisor: os.OpenFile":  "/dev/null for the detached supervisor",
	"cli/orch_serve.go:spawnSupervisor: os.OpenFile": "/dev/null for the detached supervisor",
	"cli/orch_client.go:readPlan: capped.ReadFile":   "a plan file a person names",
	"cli/subagent.go:readLimited: capped.ReadFile":   "a file a person names",
	"cli/verify.go:verifyFile: os.Open":              "the bundle a person names",
	"cli/audit.go:checkpointerFor: os.ReadFile":      "keys/audit.pub in AGORA_HOME",
	"cli/writeout.go:openOutDir: os.OpenFile":        "opens the --to directory a person names, to write into",
	"cli/writeout.go:writeOutFile: os.OpenFile":      "creates the --out file a person names (O_EXCL|O_NOFOLLOW)",
}

func TestSandboxPathsReadOnlyThroughSandboxfs(t *testing.T) {
	seen := map[string]bool{}
	for _, pkg := range hostReaders {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					x, ok := sel.X.(*ast.Ident)
					if !ok || !fileReads[x.Name+"."+sel.Sel.Name] {
						return true
					}
					key := filepath.ToSlash(path) + ":" + fn.Name.Name + ": " + x.Name + "." + sel.Sel.Name
					seen[key] = true
					if _, ok := readAllowed[key]; !ok {
						t.Errorf("%s: %s.%s in %s reads a file outside internal/sandboxfs; read the stage directory through sandboxfs, or add it to readAllowed with why it never touches a sandbox-writable path",
							fset.Position(call.Pos()), x.Name, sel.Sel.Name, fn.Name.Name)
					}
					return true
				})
			}
		}
	}
	for key := range readAllowed {
		if !seen[key] {
			t.Errorf("readAllowed lists %q, which no longer exists: remove it", key)
		}
	}
}
