package dispatch

import (
	"context"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
)

// nopProvider is a compute.Provider that only says who it is.
type nopProvider struct{ name string }

func (p *nopProvider) Start(context.Context, compute.Spec) (compute.Handle, error) { return nil, nil }
func (p *nopProvider) Cancel(context.Context, string) error                        { return nil }

func TestProviderFor_ByTarget(t *testing.T) {
	c := config.Default("/h")
	img := "t" + "@sha256:" + strings.Repeat("ab", 32)
	if err := config.Parse("agora.yaml", []byte("targets:\n  box: {provider: docker, image: "+img+"}\n"), c); err != nil {
		t.Fatal(err)
	}
	local := &nopProvider{"local"}
	d := &Dispatcher{Config: c, LocalProvider: local}
	if p, err := d.providerFor(context.Background(), ""); err != nil || p != local {
		t.Fatalf("default target: %v, %v; want the local provider", p, err)
	}
	if _, err := d.providerFor(context.Background(), "box"); err == nil || !strings.Contains(err.Error(), `target "box" uses provider docker, which this process cannot start`) {
		t.Fatalf("docker target without RemoteProviders: %v", err)
	}
	var asked []string
	d.RemoteProviders = func(_ context.Context, name string, tg config.Target) (compute.Provider, error) {
		asked = append(asked, name+"/"+tg.Provider+"/"+tg.Image)
		return &nopProvider{"docker"}, nil
	}
	p, err := d.providerFor(context.Background(), "box")
	if err != nil || p.(*nopProvider).name != "docker" {
		t.Fatalf("docker target: %v, %v", p, err)
	}
	if len(asked) != 1 || asked[0] != "box/docker/"+img {
		t.Fatalf("Providers asked %q", asked)
	}
	if _, err := d.providerFor(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), `target "nope" not found`) {
		t.Fatalf("unknown target: %v", err)
	}
}
