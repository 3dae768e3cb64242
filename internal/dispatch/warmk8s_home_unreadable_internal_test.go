package dispatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
)

// TestK8sHome_UnreadableKeyFailsClosed: a home whose audit.pub is there but cannot be read
// (a directory at its path; without root, a file of mode 0) has no Kubernetes identity: the
// error names the file, and what makes, opens or sweeps this home's objects by it (here the
// pool options every pool call takes) fails with it, rather than falling back to the former
// host+path identity, which is another home's as far as every replica with the key is
// concerned. Only a missing file keeps that fallback. Failed before: the read's error was
// dropped and the host+path identity returned.
func TestK8sHome_UnreadableKeyFailsClosed(t *testing.T) {
	cases := map[string]func(t *testing.T, key string){
		"a directory at its path": func(t *testing.T, key string) {
			if err := os.Remove(key); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(key, 0o700); err != nil {
				t.Fatal(err)
			}
		},
		"a file it may not read": func(t *testing.T, key string) {
			if os.Geteuid() == 0 {
				t.Skip("SKIP: root reads a file of mode 0; the directory case covers the read error")
			}
			if err := os.Chmod(key, 0); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "agora")
			initHome(t, dir)
			d := &Dispatcher{StateDir: filepath.Join(dir, "dispatches"), testOnlyHostname: "host-a"}
			spoil(t, filepath.Join(dir, home.AuditPubFile))
			ids, err := d.k8sHomes()
			if err == nil {
				t.Fatalf("an unreadable audit.pub gave the identity %+v, want an error", ids)
			}
			if msg := err.Error(); !strings.Contains(msg, filepath.Join(dir, home.AuditPubFile)) || !strings.Contains(msg, "cannot be read") {
				t.Errorf("the error does not name the unreadable file: %v", err)
			}
			d.Config = &config.Config{Targets: map[string]config.Target{"pool": {Provider: config.ProviderKubernetes, Warm: 1}}}
			d.RemoteProviders = func(context.Context, string, config.Target) (compute.Provider, error) { return poolOnly{}, nil }
			if pw, err := d.poolWarmer(t.Context(), "pool", d.Config.Targets["pool"]); err == nil || !strings.Contains(err.Error(), "audit.pub") {
				t.Errorf("the pool warmer of a home without its identity: %v, %v; want the key's error", pw, err)
			}
		})
	}

	// A missing file is a home made without keys: the former identity, as before.
	dir := filepath.Join(t.TempDir(), "agora")
	initHome(t, dir)
	if err := os.Remove(filepath.Join(dir, home.AuditPubFile)); err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{StateDir: filepath.Join(dir, "dispatches"), testOnlyHostname: "host-a"}
	if ids, err := d.k8sHomes(); err != nil || ids.current != hostPathK8sHome("host-a", dir, nil) {
		t.Errorf("a home without audit.pub: %+v, %v; want the host+path identity", ids, err)
	}
}

// poolOnly is a provider that keeps pools and is never reached: the home's identity is asked
// for first.
type poolOnly struct{ compute.Provider }

func (poolOnly) PoolWarmer(compute.PoolOptions) (compute.PoolWarmer, error) {
	return nil, errors.New("a pool warmer was made without the home's identity")
}
