package dispatch_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
)

// sweepProvider is a provider that can sweep; it records what it was told was terminal.
type sweepProvider struct{ asked map[string]bool }

func (p *sweepProvider) Start(context.Context, compute.Spec) (compute.Handle, error) { return nil, nil }
func (p *sweepProvider) Cancel(context.Context, string) error                        { return nil }
func (p *sweepProvider) Sweep(_ context.Context, terminal func(string) bool) (int, error) {
	p.asked = map[string]bool{"01JUNKNOWNDISPATCH0000000000": terminal("01JUNKNOWNDISPATCH0000000000")}
	return 1, nil
}

func TestSweepRemote_OnlyNonLocalTargetsAndNeverAnUnknownDispatch(t *testing.T) {
	ctx := t.Context()
	h, err := home.Open(ctx, filepath.Join(t.TempDir(), "home"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c := config.Default(h.Dir)
	img := "t@sha256:" + strings.Repeat("ab", 32)
	if err := config.Parse("agora.yaml", []byte("targets:\n  box: {provider: docker, image: "+img+"}\n"), c); err != nil {
		t.Fatal(err)
	}
	sp := &sweepProvider{}
	var built []string
	d := &dispatch.Dispatcher{Config: c, Records: dispatch.NewRecords(h.DB, audit.New(nil), nil),
		RemoteProviders: func(_ context.Context, name string, _ config.Target) (compute.Provider, error) {
			built = append(built, name)
			return sp, nil
		}}
	n, err := d.SweepRemote(ctx)
	if err != nil || n != 1 {
		t.Fatalf("SweepRemote = %d, %v", n, err)
	}
	if len(built) != 1 || built[0] != "box" {
		t.Fatalf("providers built for %q, want only box", built)
	}
	if got, ok := sp.asked["01JUNKNOWNDISPATCH0000000000"]; !ok || got {
		t.Fatalf("terminal(unknown) = %v (asked %v): a dispatch this home has no record of must not be swept", got, ok)
	}
}
