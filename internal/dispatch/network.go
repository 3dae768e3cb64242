package dispatch

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/egress/proxy"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// A record's network: what the sandbox can reach.
const (
	// NetworkNone: only the sandbox's own loopback.
	NetworkNone = "none"
	// NetworkProxy: loopback, and through the worker's relay the host's egress proxy, which
	// reaches only the hosts the grant allows.
	NetworkProxy = "proxy"
	// NetworkHost: the host's network, unrestricted: the explicit unsafe escape.
	NetworkHost = "host"
)

// resolveNetwork is a dispatch's network on a target whose network setting is target: the
// proxy when the grant reaches any host (the default, and what "proxy" asks for), none when it
// reaches none; "none" and "host" as the target says.
func resolveNetwork(target string, g grant.Set) string {
	switch target {
	case NetworkNone, NetworkHost:
		return target
	}
	if len(g.Egress) > 0 {
		return NetworkProxy
	}
	return NetworkNone
}

// manifestNetwork is the sandbox manifest's network for a record's.
func manifestNetwork(network string) string {
	if network == NetworkProxy {
		return wire.NetworkProxy
	}
	return ""
}

// PlaceholderPrefix starts the value a sandbox sees in a bound secret's variable.
const PlaceholderPrefix = "agora-placeholder-"

// bindSecrets replaces the value of each bound secret in secrets with a fresh placeholder and
// returns the bindings the proxy swaps back. It runs whatever the network: a bound secret's
// value never enters the sandbox.
func bindSecrets(secrets map[string]string, bound map[string]catalog.Binding) ([]proxy.Binding, error) {
	keys := slices.Sorted(maps.Keys(bound))
	var out []proxy.Binding
	for _, k := range keys {
		v, ok := secrets[k]
		if !ok {
			continue // bound in one bundle, replaced by a plain value in a later one
		}
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		ph := PlaceholderPrefix + hex.EncodeToString(b)
		secrets[k] = ph
		out = append(out, proxy.Binding{Key: k, Placeholder: ph, Value: []byte(v), Hosts: bound[k].Hosts, Headers: bound[k].Headers})
	}
	return out, nil
}

// netSetup is what a dispatch with the proxy needs before its sandbox starts.
type netSetup struct {
	token    string // the proxy's password (sandbox: none only: the loopback is the host's)
	ca       *proxy.CA
	roots    *x509.CertPool
	bindings []proxy.Binding
	trust    string // the stage's trust file
}

// needsCA reports whether the proxy may have to terminate TLS: a rule restricts requests, or
// a secret is bound to some host.
func needsCA(rules []grant.EgressRule, bindings []proxy.Binding) bool {
	if len(bindings) > 0 {
		return true
	}
	for _, r := range rules {
		if r.Restricted() {
			return true
		}
	}
	return false
}

// prepareProxy makes the dispatch's CA when it needs one and writes the sandbox's trust file:
// the system's roots, agora.yaml's egress.ca_certs, the CA. The system's bundle is read
// once per process (trust.go).
func (d *Dispatcher) prepareProxy(r *Record, st *stage, bindings []proxy.Binding) (*netSetup, error) {
	ns := &netSetup{bindings: bindings}
	if r.Sandbox == compute.SandboxNone {
		tok := make([]byte, 24)
		if _, err := rand.Read(tok); err != nil {
			return nil, err
		}
		ns.token = hex.EncodeToString(tok)
	}
	var rules []grant.EgressRule
	if r.Grants != nil {
		rules = r.Grants.Egress
	}
	sys, err := systemTrust()
	if err != nil {
		return nil, err
	}
	var pem bytes.Buffer
	pem.Write(sys)
	if len(d.EgressRoots) > 0 {
		pem.WriteString("\n")
		pem.Write(d.EgressRoots)
	}
	if needsCA(rules, bindings) || len(d.learnHosts(r)) > 0 {
		// A learn dispatch's proxy reads the requests to learn hosts: their methods and
		// paths are what `agora capability suggest` proposes.
		// Only a proxy that terminates TLS verifies upstream servers itself; a tunnel
		// leaves that to the sandbox's tools, so its dispatch parses no roots.
		if ns.roots, err = upstreamRoots(d.EgressRoots); err != nil {
			return nil, err
		}
		lifetime := time.Duration(r.Timeout) + time.Hour
		if ns.ca, err = proxy.NewCA(r.ID, lifetime); err != nil {
			return nil, err
		}
		pem.WriteString("\n")
		pem.Write(ns.ca.CertPEM())
	}
	dir := filepath.Join(st.dir, wire.TrustDir)
	os.RemoveAll(dir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("stage trust store: %w", err)
	}
	ns.trust = filepath.Join(dir, wire.TrustFile)
	if err := os.WriteFile(ns.trust, pem.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("stage trust store: %w", err)
	}
	return ns, nil
}

// trustBinds puts the trust file at its layout path and over the system store.
func (ns *netSetup) trustBinds() []compute.Bind {
	return []compute.Bind{
		{Src: filepath.Dir(ns.trust), Dst: wire.TrustPath},
		{Src: ns.trust, Dst: wire.SystemTrustFile},
	}
}

// runningProxy is a dispatch's egress proxy and the group-commit writer of its entries.
type runningProxy struct {
	p         *proxy.Proxy
	stopAudit context.CancelFunc
	served    chan struct{}
}

// Proxy audit budget: a busy npm install opens hundreds of connections, a runaway loop
// thousands a second; each connection costs two entries.
const proxyAuditEntries = 20000

// startProxy starts the egress proxy of dispatch r on rg's directory. Its entries are
// appended with group commit (a burst of connections shares commits), each before its
// effect; a spent budget pulls trip. notice receives each refusal's sentence.
func (d *Dispatcher) startProxy(r *Record, rg *runningGateway, ns *netSetup, trip *limitTrip, notice func(string)) error {
	role := r.Subagent + "@" + string(r.SubagentDigest)
	b := d.Records.newBatcher()
	ctx, cancel := context.WithCancel(context.Background())
	go b.Run(ctx)
	var rules []grant.EgressRule
	if r.Grants != nil {
		rules = r.Grants.Egress
	}
	learnHosts := d.learnHosts(r)
	p, err := proxy.New(proxy.Config{
		Rules: rules, Learn: r.Learn, LearnHosts: learnHosts, Dialer: egress.NewDialer(d.Egress, d.Resolver), Token: ns.token, CA: ns.ca, Roots: ns.roots,
		Bindings: ns.bindings, Audit: &batchAuditor{b: b, id: r.ID, role: role},
		MaxAuditEntries: proxyAuditEntries, OnLimit: trip.Trip, Notice: notice,
	})
	if err != nil {
		cancel()
		return err
	}
	ln, err := net.Listen("unix", filepath.Join(rg.dir, wire.ProxySocket))
	if err != nil {
		cancel()
		return fmt.Errorf("start egress proxy: %w", err)
	}
	rp := &runningProxy{p: p, stopAudit: cancel, served: make(chan struct{})}
	go func() {
		defer close(rp.served)
		p.Serve(ln)
	}()
	rg.proxy = rp
	return nil
}

// close ends every connection, waits for their last entries, then stops the writer.
func (rp *runningProxy) close() {
	if rp == nil || rp.p == nil {
		return
	}
	rp.p.Close()
	<-rp.served
	rp.stopAudit()
}

// stats is what the proxy counted, for the record; nil without a proxy or when it saw nothing.
func (rg *runningGateway) netStats() *proxy.Stats {
	if rg == nil || rg.proxy == nil {
		return nil
	}
	s := rg.proxy.p.Stats()
	if len(s.Reached) == 0 && len(s.Refused) == 0 {
		return nil
	}
	return &s
}

// batchAuditor appends the proxy's entries through a group-commit writer, attributed to the
// dispatch and its role like the gateway's.
type batchAuditor struct {
	b        *audit.Batcher
	id, role string
}

func (a *batchAuditor) Record(ctx context.Context, kind string, details map[string]any) error {
	return a.b.Append(ctx, audit.Entry{
		Actor:   entry.GatewayActor(a.id, a.role),
		Kind:    kind,
		Subject: entry.Dispatch(a.id),
		Details: details,
	})
}
