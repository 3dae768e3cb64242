package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/version"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/workerbin"
)

// GatewaySessionsDir is where the network gateway's sessions live below AGORA_HOME.
const GatewaySessionsDir = "gateway/sessions"

// GatewaySlotsDir is where the warm slots' tokens live below AGORA_HOME (netgw.Slots).
const GatewaySlotsDir = "gateway/slots"

// gatewayRegistry returns the network gateway's session registry (the remote.Exporter a
// kubernetes provider uses) and the CA certificate its pods trust; the CA is made on first
// use, for host. Its sessions are also kept in agora.db (db), which decides whether one
// stands: a replica restored from the replica of agora.db accepts the in-flight Jobs' tokens,
// and a session ended anywhere stays ended (netgw/stored.go).
//
// uploads, when not nil (a serve that replicates its home: keptUploads), keeps each result
// upload beyond this host's disk before the gateway answers it, and gives a session taken
// over its kept upload (netgw/kept.go).
func gatewayRegistry(homeDir string, db *store.DB, uploads netgw.UploadStore, hosts []string) (*netgw.Registry, *netgw.Certs, error) {
	certs, err := netgw.LoadOrCreateCA(filepath.Join(homeDir, home.KeyDir), hosts)
	if err != nil {
		return nil, nil, err
	}
	return &netgw.Registry{Dir: filepath.Join(homeDir, GatewaySessionsDir), Sessions: &netgw.DBSessions{DB: db}, Uploads: uploads}, certs, nil
}

// keptUploads is where a home that replicates keeps its gateway's result uploads: the blob
// store (blobs.s3 in a cluster, which every replica reads) and agora.db, answered once
// agora.db's replica holds the row. nil when h does not replicate: its disk is the only one.
func keptUploads(h *home.Home) netgw.UploadStore {
	wait := agoraReplicated(h)
	if wait == nil {
		return nil
	}
	return &netgw.DBUploads{DB: h.DB, Blobs: h.Blobs, Replicated: wait}
}

// networkGateway prepares the network gateway on listen, certified for advertise's host (each
// defaulting to agora.yaml's gateway:) and returns the function that serves it until ctx ends.
// agora gateway serve and agora orch serve --gateway run it.
func networkGateway(ctx context.Context, f *cmdutil.Factory, listen, advertise string) (func(context.Context) error, error) {
	h, err := f.Home(ctx)
	if err != nil {
		return nil, err
	}
	listen = cmp.Or(listen, h.Config.Gateway.Listen)
	advertise = cmp.Or(advertise, h.Config.Gateway.Advertise)
	if listen == "" || advertise == "" {
		return nil, errors.New("the gateway needs an address to listen on and the URL pods reach it at: give --listen and --advertise, or set gateway: {listen, advertise} in agora.yaml")
	}
	host, err := netgw.AdvertisedHost(advertise)
	if err != nil {
		return nil, fmt.Errorf("gateway advertise URL: %w", err)
	}
	reg, certs, err := gatewayRegistry(h.Dir, h.DB, keptUploads(h), []string{host})
	if err != nil {
		return nil, err
	}
	ln, err := gatewayListener(f.Getenv, listen)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	// The slots too: a resident agora's Kubernetes warm slots claim their dispatch here.
	// Fence: with leader: in agora.yaml, a replica whose Lease fence shut serves nothing
	// (store.CheckFence is nil without a fence).
	srv := &netgw.Server{Registry: reg, Slots: &netgw.Slots{Dir: filepath.Join(h.Dir, GatewaySlotsDir)},
		Version: hostWorkerVersion(f, h.Config), Log: slog.New(slog.NewJSONHandler(f.IO.ErrOut, nil)), Fence: store.CheckFence}
	if pooled(h.Config) {
		// The pods of agent-sandbox warm pools (warm_pool: true) enrol here with their
		// projected tokens, which the apiserver's TokenReview verifies.
		d, err := f.Dispatcher(ctx)
		if err == nil {
			srv.Pods, err = d.PoolVerifier(ctx)
		}
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("gateway: the warm pools' pod verifier: %w", err)
		}
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: gateway serving on %s as %s; pods trust %s\n", ln.Addr(), advertise,
		filepath.Join(h.Dir, home.KeyDir, netgw.CACertFile))
	return func(ctx context.Context) error { return srv.Serve(ctx, ln, certs.Server) }, nil
}

// ListenFDEnv names the descriptor of a listening socket the gateway's parent bound for it
// (agora selftest's throw-away gateway): the port stays held from the parent's choice to the
// gateway's start, where a port picked, closed and bound again could be taken meanwhile. The
// socket must listen on --listen's address exactly.
const ListenFDEnv = "AGORA_GATEWAY_LISTEN_FD"

// gatewayListener is the gateway's socket on listen: the inherited one ListenFDEnv names,
// else a new one.
func gatewayListener(getenv func(string) string, listen string) (net.Listener, error) {
	v := getenv(ListenFDEnv)
	if v == "" {
		return net.Listen("tcp", listen)
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q: want the number of an inherited descriptor, 3 or more", ListenFDEnv, v)
	}
	// The listener holds a copy of the descriptor; the inherited one is closed either way, so
	// nothing this process starts inherits it.
	file := os.NewFile(uintptr(fd), "inherited gateway listener")
	defer file.Close()
	ln, err := net.FileListener(file)
	if err != nil {
		return nil, fmt.Errorf("%s=%d: not a listening socket: %w", ListenFDEnv, fd, err)
	}
	got, ok := ln.Addr().(*net.TCPAddr)
	want, werr := net.ResolveTCPAddr("tcp", listen)
	if !ok || werr != nil || !sameTCPAddr(got, want) {
		ln.Close()
		return nil, fmt.Errorf("%s=%d listens on %s, not on --listen %s", ListenFDEnv, fd, ln.Addr(), listen)
	}
	return ln, nil
}

// sameTCPAddr says whether a socket on got listens where want names: the same port, and the
// same address or both any address (":8443" listens on [::] or 0.0.0.0).
func sameTCPAddr(got, want *net.TCPAddr) bool {
	if got.Port != want.Port {
		return false
	}
	if want.IP == nil || want.IP.IsUnspecified() {
		return got.IP == nil || got.IP.IsUnspecified()
	}
	return got.IP.Equal(want.IP)
}

// hostWorkerVersion is what the gateway tells a pod's worker to match: the identity of the
// worker program this agora dispatches with (agora-worker beside it, or the one agora.yaml or
// AGORA_WORKER_BINARY names), which `make image` copies into the worker image. An unversioned
// build is compared by its bytes, so a stale image of one is refused.
func hostWorkerVersion(f *cmdutil.Factory, c *config.Config) string {
	// Without a worker program to read, this agora's own version: a release's still matches
	// its image; an unversioned build's matches nothing.
	fallback := remote.Identity(version.Short(), "")
	exe, err := os.Executable()
	if err != nil {
		return fallback
	}
	configured, err := c.WorkerBinary(f.Getenv)
	if err != nil {
		return fallback
	}
	path, err := workerbin.Locate(exe, configured)
	if err != nil {
		return fallback
	}
	return workerremote.VersionOf(path)
}

// pooled says whether a target of c keeps its warm pods in an agent-sandbox SandboxWarmPool.
func pooled(c *config.Config) bool {
	for _, t := range c.Targets {
		if t.KeepsPool() {
			return true
		}
	}
	return false
}
