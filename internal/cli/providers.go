package cli

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/compute/container/slots"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/store"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// remoteProviders builds the providers of a home's docker and kubernetes targets on first
// use and keeps one per target for the life of the process: a long-lived serve or MCP server
// would otherwise open a client per dispatch.
type remoteProviders struct {
	homeDir string
	db      *store.DB // agora.db: the gateway's stored sessions (netgw.DBSessions)
	// replicas, with replicate.s3: a Start's session waits for them (replicate_export.go).
	replicas []replicatedFirst
	// uploads, with replicate.s3: where a session taken over finds its kept upload.
	uploads netgw.UploadStore
	// worker is the worker binary's path: a docker target's slot gateway answers with its build.
	worker string
	mu     sync.Mutex
	built  map[string]compute.Provider // guarded by mu
}

func newRemoteProviders(homeDir string, db *store.DB, replicas []replicatedFirst, uploads netgw.UploadStore, worker string) *remoteProviders {
	return &remoteProviders{homeDir: homeDir, db: db, replicas: replicas, uploads: uploads, worker: worker, built: map[string]compute.Provider{}}
}

// For is dispatch.Dispatcher.RemoteProviders.
func (r *remoteProviders) For(ctx context.Context, name string, t config.Target) (compute.Provider, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.built[name]; ok {
		return p, nil
	}
	var (
		p   compute.Provider
		err error
	)
	switch t.Provider {
	case config.ProviderDocker:
		// Its warm slots are the provider's, with the home's slot gateway (compute/container/slots).
		if p, err = newContainerProvider(ctx, t); err == nil {
			p = slots.New(p.(*container.Provider), slots.Options{Home: r.homeDir, Version: workerremote.VersionOf(r.worker)})
		}
	case config.ProviderKubernetes:
		p, err = r.kubernetes(name, t)
	default:
		err = fmt.Errorf("provider %q is not one this build can start", t.Provider)
	}
	if err != nil {
		return nil, err
	}
	r.built[name] = p
	return p, nil
}

// kubernetes builds a kubernetes target's provider: its pods reach the network gateway at
// the target's gateway URL, trusting the CA in AGORA_HOME/keys that certifies that host.
func (r *remoteProviders) kubernetes(name string, t config.Target) (compute.Provider, error) {
	u, err := url.Parse(t.Gateway)
	if err != nil {
		return nil, fmt.Errorf("gateway %q: %w", t.Gateway, err)
	}
	reg, certs, err := gatewayRegistry(r.homeDir, r.db, r.uploads, []string{u.Hostname()})
	if err != nil {
		return nil, err
	}
	return kubernetes.New(kubernetes.Options{
		Kubeconfig: t.Kubeconfig, Context: t.Context, Namespace: t.Namespace,
		Image: t.Image, WorkerImage: t.WorkerImage, RuntimeClass: t.RuntimeClass,
		CPU: string(t.Resources.CPU), Memory: string(t.Resources.Memory),
		NodeSelector: t.NodeSelector, TTL: t.TTLAfterFinished,
		GatewayURL: t.Gateway, GatewayCA: certs.CAPEM, Exporter: exporterFor(reg, r.replicas), Target: name,
		// A pool pod's slot is the home's gateway's (netgw/pool.go): the gateway the pods
		// reach serves AGORA_HOME/gateway/slots, where a claim binds the dispatch to it.
		BindPod:    (&netgw.Slots{Dir: filepath.Join(r.homeDir, "gateway", "slots")}).BindPod,
		SandboxUID: uint32(t.SandboxUID), Backend: t.Backend,
		PullSecrets: t.ImagePullSecrets, PullPolicy: t.ImagePullPolicy,
		GatewayPeer: gatewayPeer(t.GatewayPeer),
	})
}

// gatewayPeer is agora.yaml's gateway_peer as the provider takes it.
func gatewayPeer(p *config.GatewayPeer) *kubernetes.GatewayPeer {
	if p == nil {
		return nil
	}
	return &kubernetes.GatewayPeer{Namespace: p.Namespace, Pods: p.Pods}
}
