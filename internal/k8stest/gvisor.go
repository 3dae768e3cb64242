package k8stest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// gVisor on the real node: runsc and containerd-shim-runsc-v1, built by
// scripts/gvisor-tools.sh into .cache/gvisor/bin, become the containerd runtime handler
// GVisorHandler beside the default runc. A pod whose runtimeClassName names a RuntimeClass
// with that handler runs its containers in a gVisor sandbox: their system calls go to
// gVisor's own kernel (the Sentry), not the host's.
const (
	// GVisorHandler is the runtime handler (the CRI runtime name) of gVisor on the real node.
	GVisorHandler = "runsc"
	// GVisorRuntimeClass is the RuntimeClass Options.GVisor makes, with handler GVisorHandler.
	GVisorRuntimeClass = "gvisor"
	gvisorShim         = "containerd-shim-runsc-v1"
)

// gvisorBinDir is the directory holding runsc and its shim, or why there is none.
func gvisorBinDir() (dir, missing string) {
	root, err := moduleRoot()
	if err != nil {
		return "", "find gVisor's binaries: " + err.Error()
	}
	dir = filepath.Join(root, ".cache", "gvisor", "bin")
	var absent []string
	for _, name := range []string{"runsc", gvisorShim} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			absent = append(absent, name)
		}
	}
	if len(absent) > 0 {
		return "", fmt.Sprintf("no %s in %s: run scripts/gvisor-tools.sh (make gvisor-tools)", strings.Join(absent, ", "), dir)
	}
	return dir, ""
}

// gvisorRuntime is the containerd config's runsc runtime (appended to the CRI plugin's
// runtimes) and the shim's own config, which names runsc by absolute path and keeps runsc's
// state under the cluster's directory. containerd finds the shim by its name on its PATH
// (gvisorEnv). The platform is systrap, gVisor's default (seccomp traps, no KVM needed).
// oci-seccomp: runsc ignores the pod's seccomp profile (RuntimeDefault, which agora's pods
// and Pod Security "restricted" require) unless told, and a gVisor container then reports
// Seccomp: 0; with it, gVisor's kernel enforces the profile on the pod's processes too, as
// runc's host kernel does.
func gvisorRuntime(dir, bin string) (runtime string, err error) {
	cfg := filepath.Join(dir, "runsc.toml")
	shim := fmt.Sprintf(`binary_name = %q
root = %q
[runsc_config]
  platform = "systrap"
  oci-seccomp = "true"
`, filepath.Join(bin, "runsc"), filepath.Join(dir, "runsc"))
	if err := os.WriteFile(cfg, []byte(shim), 0o600); err != nil {
		return "", fmt.Errorf("write the runsc shim's config: %w", err)
	}
	return fmt.Sprintf(`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%[1]s]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%[1]s.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = %[2]q
`, GVisorHandler, cfg), nil
}

// shimAdapter stands in for containerd-shim-runsc-v1 on containerd's PATH. This shim is
// built on containerd 2's shim library, whose `start` answers JSON
// ({"version":2,"address":"unix:///run/containerd/s/...","protocol":"ttrpc"}); Debian's
// containerd 1.6 reads that answer as the bare address and fails to dial it. The adapter runs
// the real shim and turns a JSON answer into its address; every other call (delete, the
// shim's own daemon, which it starts from its own executable) is the real shim's.
const shimAdapter = `#!/bin/sh
real=%q
eval "last=\${$#}"
[ "$last" = start ] || exec "$real" "$@"
out=$("$real" "$@") || { code=$?; printf '%%s' "$out"; exit $code; }
case $out in
'{'*) printf '%%s' "$out" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p' | tr -d '\n' ;;
*) printf '%%s' "$out" ;;
esac
`

// gvisorEnv writes the shim adapter under dir and puts its directory first on containerd's
// PATH, where containerd looks for containerd-shim-runsc-v1.
func gvisorEnv(dir, bin string) ([]string, error) {
	shimDir := filepath.Join(dir, "gvisor-shim")
	if err := os.MkdirAll(shimDir, 0o700); err != nil {
		return nil, fmt.Errorf("make the runsc shim adapter's directory: %w", err)
	}
	adapter := fmt.Sprintf(shimAdapter, filepath.Join(bin, gvisorShim))
	if err := os.WriteFile(filepath.Join(shimDir, gvisorShim), []byte(adapter), 0o700); err != nil {
		return nil, fmt.Errorf("write the runsc shim adapter: %w", err)
	}
	return []string{"PATH=" + shimDir + string(os.PathListSeparator) + os.Getenv("PATH")}, nil
}

// createGVisorRuntimeClass makes RuntimeClass GVisorRuntimeClass (cluster-scoped) with
// handler GVisorHandler; one already there is fine.
func (c *Cluster) createGVisorRuntimeClass(ctx context.Context) error {
	rc := map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
		"metadata": map[string]any{"name": GVisorRuntimeClass},
		"handler":  GVisorHandler,
	}
	err := c.Do(ctx, http.MethodPost, "/apis/node.k8s.io/v1/runtimeclasses", rc, nil)
	var se *StatusError
	if err != nil && !(errors.As(err, &se) && se.Code == http.StatusConflict) {
		return fmt.Errorf("create RuntimeClass %s: %w", GVisorRuntimeClass, err)
	}
	return nil
}
