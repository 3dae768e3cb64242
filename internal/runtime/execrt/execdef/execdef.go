// Package execdef describes the exec runtime for both sides of the sandbox: package
// runtimes lists [Runtime]; the worker runs it through package execadapter.
package execdef

import "github.com/agora-dev/agora/internal/runtime/runtimes/spec"

// Name is the runtime's name in a subagent document and a manifest.
const Name = "exec"

// Runtime runs the subagent's command as it is.
var Runtime = spec.Runtime{Name: Name, Needs: spec.Needs{Command: true}}
