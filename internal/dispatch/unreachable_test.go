package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// exitProvider is a compute.Provider at the process edge: every task it starts exits with
// exit and writes nothing, as a pod whose worker never reached the gateway does.
type exitProvider struct{ exit compute.Exit }

func (p *exitProvider) Start(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	return exitHandle{p.exit}, nil
}
func (p *exitProvider) Cancel(context.Context, string) error { return nil }

type exitHandle struct{ exit compute.Exit }

func (h exitHandle) TaskID() string              { return "k8s:agents/agora-test" }
func (h exitHandle) Wait() (compute.Exit, error) { return h.exit, nil }

// TestDispatch_GatewayUnreachableIsNotTheAgents: a pod's worker that gave up on the network
// gateway (it exited remote.ExitGatewayUnreachable, which the kubernetes provider reports as
// Exit.GatewayUnreachable) is recorded failed/gateway-unreachable, audited so, and not
// worker-failed: the agent did nothing wrong, and plans retry it. The same exit code without
// the provider's word (a local worker that exited 75) stays worker-failed.
func TestDispatch_GatewayUnreachableIsNotTheAgents(t *testing.T) {
	for _, tt := range []struct {
		name   string
		exit   compute.Exit
		reason string
	}{
		{"reported", compute.Exit{Code: remote.ExitGatewayUnreachable, GatewayUnreachable: true}, lifecycle.ReasonGatewayUnreachable},
		{"bare-code", compute.Exit{Code: remote.ExitGatewayUnreachable}, lifecycle.ReasonWorkerFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tg := e.home.Config.Targets[config.DefaultTarget]
			tg.Provider = config.ProviderKubernetes
			e.home.Config.Targets["pod"] = tg
			e.d.RemoteProviders = func(context.Context, string, config.Target) (compute.Provider, error) {
				return &exitProvider{tt.exit}, nil
			}
			e.subagent("quiet", "true")
			r := e.run(dispatch.Request{Subagent: "quiet", Target: "pod", Timeout: time.Minute})
			if r.State != lifecycle.DispatchFailed || r.Reason != tt.reason {
				t.Fatalf("dispatch ended %s/%s (%s), want failed/%s", r.State, r.Reason, r.Detail, tt.reason)
			}
			if tt.reason == lifecycle.ReasonGatewayUnreachable && !strings.Contains(r.Detail, "network gateway") {
				t.Errorf("detail %q does not say the gateway was unreachable", r.Detail)
			}
			if !strings.Contains(e.auditDump(), `"reason":"`+tt.reason+`"`) {
				t.Errorf("the audit log does not record reason %s", tt.reason)
			}
		})
	}
}

// TestDispatch_PodWorkerImageOnTheRecord: a kubernetes target binds no host worker, so its
// record and provenance statement name the digest-pinned image its pod ran the worker from
// (a pod's dispatch recorded no worker identity at all); a local dispatch names
// its pinned binary and no image.
func TestDispatch_PodWorkerImageOnTheRecord(t *testing.T) {
	const image = "registry.example/agora-worker@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	e := newEnv(t)
	tg := e.home.Config.Targets[config.DefaultTarget]
	tg.Provider = config.ProviderKubernetes
	tg.WorkerImage = image
	e.home.Config.Targets["pod"] = tg
	e.d.RemoteProviders = func(context.Context, string, config.Target) (compute.Provider, error) {
		return &exitProvider{compute.Exit{Code: 0}}, nil
	}
	e.subagent("quiet", "true")
	r := e.run(dispatch.Request{Subagent: "quiet", Target: "pod", Timeout: time.Minute})
	if r.WorkerImage != image || r.WorkerBinary != nil {
		t.Fatalf("pod dispatch (%s/%s %s): worker_image %q, worker_binary %+v; want the target's image and no binary", r.State, r.Reason, r.Detail, r.WorkerImage, r.WorkerBinary)
	}
	got, err := e.d.Records.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.WorkerImage != image {
		t.Errorf("stored record's worker_image %q, want %q", got.WorkerImage, image)
	}
	prov, err := dispatch.Provenance(got)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(prov), `"worker_image":"`+image+`"`) {
		t.Errorf("provenance does not name the worker image:\n%s", prov)
	}

	local := e.run(dispatch.Request{Subagent: "quiet", Timeout: time.Minute})
	if local.WorkerImage != "" || local.WorkerBinary == nil {
		t.Errorf("local dispatch: worker_image %q, worker_binary %+v; want a pinned binary and no image", local.WorkerImage, local.WorkerBinary)
	}
	if prov, err := dispatch.Provenance(local); err != nil || strings.Contains(string(prov), "worker_image") {
		t.Errorf("a local dispatch's provenance names a worker image (%v):\n%s", err, prov)
	}
}
