package doctor

import (
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/runtimebin"
)

// runtimes lists each host-installed agent CLI: the native binary it resolves to, its
// version and digest, or what is missing and the command that installs it. None is required:
// only dispatches of that runtime need it.
func (r *run) runtimes(o Options) {
	if r.h.RuntimeBinary == nil {
		return
	}
	for _, name := range runtimebin.Runtimes() {
		configured := ""
		if o.Config != nil {
			configured = o.Config.RuntimeBinary(name)
		}
		check := "runtime-" + name
		b, err := r.h.RuntimeBinary(r.ctx, name, configured)
		var nf *runtimebin.NotFoundError
		switch {
		case errors.As(err, &nf):
			fix := runtimebin.InstallCommand(name)
			if configured != "" {
				fix += fmt.Sprintf(", or correct runtimes.%s.binary in agora.yaml", name)
			}
			r.missing(check, err.Error(), fix, false)
		case err != nil:
			r.missing(check, err.Error(), fmt.Sprintf("reinstall with %s, or set runtimes.%s.binary to the native executable", runtimebin.InstallCommand(name), name), false)
		default:
			r.ok(check, fmt.Sprintf("%s, %s, sha256 %s (bound read-only at %s)", b.Path, b.Version, b.SHA256, b.SandboxPath()), false)
		}
	}
}
