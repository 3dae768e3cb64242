package selftest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// grantedAddr is the loopback address of the granted host: the network attacks need a host
// the grant names that answers (a redirect, a request whose Host is another), and the
// gateway attacks a model endpoint, with no internet. The throw-away home's egress admits
// this one address (allow_private), never 127.0.0.1, where the host's services and the
// runner's listener are.
const grantedAddr = "127.0.0.2"

// fixtureCap caps what a fixture keeps of one request or connection.
const fixtureCap = 8 << 10

// quiet is the fixtures' HTTP servers' error log: an attack's broken handshake is the
// attack's, and the person's terminal is for the table.
var quiet = log.New(io.Discard, "", 0)

// fixtures are the runner's host-side servers for the network and gateway attacks: what
// reaches one of them crossed a boundary, or was let through by agora on purpose (the
// granted host, the model). Each keeps what it got, so an observation can look for a run's
// nonce; attacks put their nonce in every request.
type fixtures struct {
	// port6 is a TCP listener on the host's IPv6 loopback, 0 when the host has none.
	port6 int
	// dnsPort is a UDP "resolver" on the host's loopback that keeps every query.
	dnsPort int
	// grantedPort is the granted host's HTTP server on grantedAddr (also the scripted model
	// at /v1/), 0 when the address cannot be bound here; tlsPort and tlsPort2 the same host
	// over TLS (tlsfixture.go), with caFile its CA's certificate.
	grantedPort, tlsPort, tlsPort2 int
	caFile                         string
	// sock is a Unix socket in the host's temporary directory, abstract one in the host's
	// abstract namespace (which belongs to its network namespace).
	sock, abstract string
	// modelKey is the API key the model requires; envSecret the gateway env bundle's other
	// secret; token and otherToken the credentials bound to grantedAddr and to another
	// host. None of them is ever in a sandbox.
	modelKey, envSecret, token, otherToken string

	mu    sync.Mutex
	got   []string // guarded by mu: what the network fixtures got
	model []string // guarded by mu: the model requests' bodies

	closers []io.Closer
	wg      sync.WaitGroup
}

// startFixtures starts the fixtures; one that cannot start on this host is left out, and
// the attacks that need it report not run.
func startFixtures(work string) (*fixtures, error) {
	fx := &fixtures{}
	for _, p := range []*string{&fx.modelKey, &fx.envSecret, &fx.token, &fx.otherToken} {
		v, err := randomHex()
		if err != nil {
			return nil, err
		}
		*p = "selftest-" + v
	}
	if l, err := net.Listen("tcp", "[::1]:0"); err == nil {
		fx.port6 = l.Addr().(*net.TCPAddr).Port
		fx.serveRaw(l, "the host's IPv6 loopback listener")
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		fx.close()
		return nil, fmt.Errorf("listen for the selftest's DNS fixture: %w", err)
	}
	fx.dnsPort = pc.LocalAddr().(*net.UDPAddr).Port
	fx.serveDNS(pc)
	if l, err := net.Listen("tcp", grantedAddr+":0"); err == nil {
		fx.grantedPort = l.Addr().(*net.TCPAddr).Port
		fx.serveHTTP(l)
		if err := fx.startTLS(work); err != nil {
			fx.tlsPort, fx.tlsPort2, fx.caFile = 0, 0, ""
		}
	}
	dir := filepath.Join(work, "sock")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fx.close()
		return nil, err
	}
	fx.sock = filepath.Join(dir, "host.sock")
	if l, err := net.Listen("unix", fx.sock); err == nil {
		os.Chmod(fx.sock, 0o777)
		fx.serveRaw(l, "the host's Unix socket")
	} else {
		fx.sock = ""
	}
	name, err := randomHex()
	if err != nil {
		fx.close()
		return nil, err
	}
	if l, err := net.Listen("unix", "@agora-selftest-"+name); err == nil {
		fx.abstract = "agora-selftest-" + name
		fx.serveRaw(l, "the host's abstract Unix socket")
	}
	return fx, nil
}

func (fx *fixtures) close() {
	if fx == nil {
		return
	}
	for _, c := range fx.closers {
		c.Close()
	}
	fx.wg.Wait()
}

func (fx *fixtures) keep(list *[]string, what string, b []byte) {
	b = b[:min(len(b), fixtureCap)]
	// The evidence names a secret that got here, never its value.
	for _, sec := range [][2]string{{fx.token, "SELFTEST_TOKEN"}, {fx.otherToken, "SELFTEST_OTHER_TOKEN"}, {fx.modelKey, "OPENAI_API_KEY"}, {fx.envSecret, "SELFTEST_SECRET"}} {
		if sec[0] != "" {
			b = bytes.ReplaceAll(b, []byte(sec[0]), []byte("<the value of "+sec[1]+">"))
		}
	}
	fx.mu.Lock()
	*list = append(*list, what+": "+string(b))
	fx.mu.Unlock()
}

// saw returns what a network fixture got carrying nonce, "" for nothing.
func (fx *fixtures) saw(nonce string) string { return fx.find(&fx.got, nonce) }

// modelSaw returns the model request carrying m, "" for none.
func (fx *fixtures) modelSaw(m string) string { return fx.find(&fx.model, m) }

func (fx *fixtures) find(list *[]string, s string) string {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	for _, g := range *list {
		if i := strings.Index(g, s); i >= 0 {
			what, _, _ := strings.Cut(g, ": ")
			return what + " got the run's nonce: " + clip(strings.ToValidUTF8(strings.Join(strings.Fields(g[len(what)+2:]), " "), "?"), 160)
		}
	}
	return ""
}

// serveRaw keeps the first bytes of every connection to l.
func (fx *fixtures) serveRaw(l net.Listener, what string) {
	fx.closers = append(fx.closers, l)
	fx.wg.Add(1)
	go func() {
		defer fx.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 2048)
			n, _ := io.ReadAtLeast(c, buf, 1)
			c.Close()
			fx.keep(&fx.got, what+" (a connection)", buf[:n])
		}
	}()
}

// serveDNS keeps every datagram: a query's name is its labels' bytes, so a nonce in a
// name is in the datagram as it is.
func (fx *fixtures) serveDNS(pc net.PacketConn) {
	fx.closers = append(fx.closers, pc)
	fx.wg.Add(1)
	go func() {
		defer fx.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			fx.keep(&fx.got, "the DNS resolver on the host's loopback", buf[:n])
		}
	}()
}

// serveHTTP serves the granted host and the scripted model on l.
func (fx *fixtures) serveHTTP(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(fx.handle), ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet}
	fx.closers = append(fx.closers, srv)
	fx.wg.Add(1)
	go func() {
		defer fx.wg.Done()
		srv.Serve(l)
	}()
}

func (fx *fixtures) handle(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		fx.serveModel(w, r)
		return
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s %s Host: %s", r.Method, r.RequestURI, r.Proto, r.Host)
	// Authorization first: the evidence is cut, and what the host got as a credential is
	// what the credential attacks are about.
	for _, k := range slices.SortedFunc(maps.Keys(r.Header), func(a, b string) int {
		return strings.Compare(strings.TrimPrefix(a, "Authorization"), strings.TrimPrefix(b, "Authorization"))
	}) {
		fmt.Fprintf(&head, " %s: %s", k, strings.Join(r.Header[k], ", "))
	}
	fx.keep(&fx.got, "the granted host", head.Bytes())
	// /selftest/redirect/PORT/NONCE answers with a redirect to the host's loopback: a
	// granted host that reflects the client elsewhere.
	if rest, ok := strings.CutPrefix(r.URL.Path, "/selftest/redirect/"); ok {
		port, nonce, _ := strings.Cut(rest, "/")
		if _, err := strconv.Atoi(port); err == nil {
			http.Redirect(w, r, "http://127.0.0.1:"+port+"/"+nonce, http.StatusFound)
			return
		}
	}
	io.WriteString(w, "selftest granted host\n")
}

// input adds the fixtures' addresses to an attack's input.
func (fx *fixtures) input(m map[string]string) {
	m["port6"], m["dnsport"] = portString(fx.port6), portString(fx.dnsPort)
	for k, p := range map[string]int{"granted": fx.grantedPort, "granted_tls": fx.tlsPort, "granted_tls2": fx.tlsPort2} {
		m[k] = ""
		if p != 0 {
			m[k] = grantedAddr + ":" + strconv.Itoa(p)
		}
	}
	m["sock"], m["abstract"] = fx.sock, fx.abstract
}

func portString(p int) string {
	if p == 0 {
		return ""
	}
	return strconv.Itoa(p)
}

// config returns the throw-away home's agora.yaml with grantedAddr admitted by
// egress.allow_private, so that the proxy and the gateway reach the fixtures there, and the
// fixtures' CA in egress.ca_certs.
func (fx *fixtures) config(cfg []byte) ([]byte, error) {
	if fx.grantedPort == 0 {
		return cfg, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		return nil, fmt.Errorf("read the throw-away home's agora.yaml: %w", err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	egress := child(doc.Content[0], "egress", yaml.MappingNode)
	add(child(egress, "allow_private", yaml.SequenceNode), grantedAddr+"/32")
	if fx.caFile != "" {
		add(child(egress, "ca_certs", yaml.SequenceNode), fx.caFile)
	}
	return yaml.Marshal(&doc)
}

// add appends v to the sequence seq unless it holds it.
func add(seq *yaml.Node, v string) {
	for _, n := range seq.Content {
		if n.Value == v {
			return
		}
	}
	seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: v})
}

// child returns m's value under key, added (of kind) when m has none.
func child(m *yaml.Node, key string, kind yaml.Kind) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == kind {
			return m.Content[i+1]
		}
	}
	v := &yaml.Node{Kind: kind}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	return v
}

// Env bundles of the throw-away home.
const (
	envModel = "selftest-model" // the scripted model's endpoint and key, and one secret
	envCred  = "selftest-cred"  // two credentials bound to hosts
)

// setup registers the env bundles the attacks name, in the throw-away home. The secrets go
// by files in the throw-away directory, never argv.
func (fx *fixtures) setup(ctx context.Context, r *run) error {
	if fx.grantedPort == 0 {
		return nil
	}
	file := func(name, v string) (string, error) {
		p := filepath.Join(r.work, "secrets", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", err
		}
		return "file:" + p, os.WriteFile(p, []byte(v), 0o600)
	}
	var errs []error
	src := func(name, v string) string {
		s, err := file(name, v)
		errs = append(errs, err)
		return s
	}
	// SELFTEST_TOKEN is bound to the granted host's first TLS port (443 when it has none, which
	// nothing here serves): the proxy terminates TLS there and reads every request.
	bound := grantedAddr
	if fx.tlsPort != 0 {
		bound += ":" + strconv.Itoa(fx.tlsPort)
	}
	model := []string{"env", "register", envModel,
		"--value", "OPENAI_BASE_URL=http://" + grantedAddr + ":" + strconv.Itoa(fx.grantedPort) + "/v1",
		"--secret", "OPENAI_API_KEY=" + src("model-key", fx.modelKey),
		"--secret", "SELFTEST_SECRET=" + src("env-secret", fx.envSecret)}
	cred := []string{"env", "register", envCred,
		"--secret", "SELFTEST_TOKEN=" + src("token", fx.token), "--bind-host", "SELFTEST_TOKEN=" + bound,
		"--secret", "SELFTEST_OTHER_TOKEN=" + src("other-token", fx.otherToken), "--bind-host", "SELFTEST_OTHER_TOKEN=127.0.0.3"}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("write the selftest's secrets: %w", err)
	}
	for _, args := range [][]string{model, cred} {
		if _, err := r.agora(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// hostRecord is what the network, gateway and verdict observations read of a dispatch's
// record.
type hostRecord struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Net    *struct {
		Reached map[string]int `json:"reached"`
		Refused map[string]int `json:"refused"`
	} `json:"net"`
	Verdict *struct {
		Passed bool   `json:"passed"`
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	} `json:"verdict"`
	Approvals []struct {
		CallID string `json:"call_id"`
		Tool   string `json:"tool"`
		State  string `json:"state"`
	} `json:"approvals"`
}

// recordOf reads raw; a record that does not parse reads as empty, which no observation
// counts as blocked.
func recordOf(raw []byte) hostRecord {
	var h hostRecord
	_ = json.Unmarshal(raw, &h)
	return h
}

func keys(m map[string]int) []string { return slices.Sorted(maps.Keys(m)) }

// net is the proxy's counts for an evidence line.
func (h hostRecord) net() string {
	if h.Net == nil {
		return " (no egress proxy on the record)"
	}
	return fmt.Sprintf(" (the proxy refused %v, reached %v)", keys(h.Net.Refused), keys(h.Net.Reached))
}

func decideRefused(h hostRecord) (string, string) {
	switch {
	case h.Net == nil || len(h.Net.Refused) == 0 && len(h.Net.Reached) == 0:
		return Allowed, "no egress proxy refused it: the record shows none stood in the way (" + h.State + " " + h.Reason + ")"
	case len(h.Net.Reached) > 0:
		return Allowed, "the egress proxy reached " + strings.Join(keys(h.Net.Reached), ", ")
	}
	return Blocked, "the egress proxy refused " + strings.Join(keys(h.Net.Refused), ", ") + " and reached nothing"
}
