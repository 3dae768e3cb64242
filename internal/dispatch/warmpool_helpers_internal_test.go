package dispatch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
)

// k8sHomeSpec is a dispatch's spec whose binds the gateway exports, its one read-only place
// /agora/bundle (k8sHomePlaces).
func k8sHomeSpec(t *testing.T, id string) compute.Spec {
	bundle, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "task.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return compute.Spec{
		ID:   id,
		Argv: []string{"/agora/bin/agora-worker", "worker"},
		Env:  []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "AGORA_DISPATCH_ID=" + id},
		Dir:  "/agora/workspace",
		Binds: []compute.Bind{
			{Src: "/usr/local/bin/agora", Dst: "/agora/bin/agora-worker"},
			{Src: bundle, Dst: "/agora/bundle"},
			{Src: out, Dst: "/agora/out", Writable: true, Result: true},
		},
		Limits: compute.Limits{Timeout: 10 * time.Minute, Memory: 1 << 30, Scratch: 256 << 20},
	}
}
