package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/egress/proxy"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/store"
)

// The benchmarks measure the path a sandboxed tool's request takes: the client, a loopback
// TCP relay (the worker's, reproduced here), the proxy's Unix socket, the proxy (every
// connection recorded in a real agora.db through the group-commit writer), the upstream
// server on loopback. "direct" is the same client straight to the server, in the same run.

type batchAudit struct{ b *audit.Batcher }

func (a batchAudit) Record(ctx context.Context, kind string, d map[string]any) error {
	return a.b.Append(ctx, audit.Entry{Actor: "dispatch/bench role", Kind: kind, Subject: "dispatch/bench", Details: d})
}

type benchRig struct {
	srv      *httptest.Server
	proxyURL *url.URL
	ca       *proxy.CA
}

func newRig(b *testing.B, body []byte, bind bool) *benchRig {
	b.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	db, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "agora.db"), audit.Migrations)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	bat := audit.NewBatcher(db, audit.New(nil))
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go bat.Run(ctx)
	u, _ := url.Parse(srv.URL)
	rules, _ := grant.EgressRules(u.Host)
	cfg := proxy.Config{
		Rules:  rules,
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil),
		Audit:  batchAudit{bat}, Roots: poolOf(srv.Certificate()),
	}
	rig := &benchRig{srv: srv}
	if bind {
		ca, err := proxy.NewCA("bench", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		cfg.CA, rig.ca = ca, ca
		cfg.Bindings = []proxy.Binding{{Key: "TOKEN", Placeholder: "agora-placeholder-bench0123456789", Value: []byte("real-secret-value-0123456789"), Hosts: []string{u.Host}}}
	}
	p, err := proxy.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(ln)
	b.Cleanup(func() { p.Close() })
	relay := startRelay(b, sock)
	rig.proxyURL, _ = url.Parse("http://" + relay)
	return rig
}

// startRelay is the worker's relay: loopback TCP to the Unix socket, byte for byte.
func startRelay(b *testing.B, sock string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() { io.Copy(u, c); u.(*net.UnixConn).CloseWrite(); close(done) }()
				io.Copy(c, u)
				c.(*net.TCPConn).CloseWrite()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

func (r *benchRig) client(viaProxy, keepAlive bool) *http.Client {
	roots := poolOf(r.srv.Certificate())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 8}
	if viaProxy {
		tr.Proxy = http.ProxyURL(r.proxyURL)
		if r.ca != nil {
			roots.AppendCertsFromPEM(r.ca.CertPEM())
		}
	}
	return &http.Client{Transport: tr}
}

// getOnce does one GET and returns how long it took.
func getOnce(b *testing.B, c *http.Client, u, auth string) time.Duration {
	start := time.Now()
	req, _ := http.NewRequest("GET", u, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return time.Since(start)
}

// paired does b.N pairs of GETs, one direct and one through the proxy, back to back, so both
// see the same machine; it reports each side's median and the median of the differences
// (what the proxy adds), in microseconds. b.N counts pairs; ns/op is a pair.
func paired(b *testing.B, direct, viaProxy *http.Client, u, directAuth, proxyAuth string) {
	var d, p, diff []time.Duration
	b.ResetTimer()
	for range b.N {
		x := getOnce(b, direct, u, directAuth)
		y := getOnce(b, viaProxy, u, proxyAuth)
		d, p, diff = append(d, x), append(p, y), append(diff, y-x)
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		v    []time.Duration
	}{{"direct-p50-µs", d}, {"proxy-p50-µs", p}, {"added-p50-µs", diff}} {
		slices.Sort(m.v)
		b.ReportMetric(float64(m.v[len(m.v)/2].Microseconds()), m.name)
	}
	slices.Sort(p)
	b.ReportMetric(float64(p[len(p)*99/100].Microseconds()), "proxy-p99-µs")
}

// BenchmarkTunnelGET: an HTTPS GET of 1 KiB, tunnelled, on a new connection each time (the
// proxy decides, dials and records each) and on a kept-alive one, paired with the same GET
// made directly.
func BenchmarkTunnelGET(b *testing.B) {
	rig := newRig(b, []byte(strings.Repeat("x", 1024)), false)
	for _, keep := range []bool{false, true} {
		name := "new-conn"
		if keep {
			name = "keep-alive"
		}
		b.Run(name, func(b *testing.B) {
			paired(b, rig.client(false, keep), rig.client(true, keep), rig.srv.URL, "", "")
		})
	}
}

// BenchmarkInterceptGET: the same GET to a host a secret is bound to: the proxy terminates
// TLS with the dispatch's CA, swaps the placeholder for the value, re-encrypts, and masks the
// value in the response.
func BenchmarkInterceptGET(b *testing.B) {
	rig := newRig(b, []byte(strings.Repeat("x", 1024)), true)
	for _, keep := range []bool{false, true} {
		name := "new-conn"
		if keep {
			name = "keep-alive"
		}
		b.Run(name, func(b *testing.B) {
			paired(b, rig.client(false, keep), rig.client(true, keep), rig.srv.URL, "Bearer x", "Bearer agora-placeholder-bench0123456789")
		})
	}
}

// BenchmarkBulk: one 64 MiB HTTPS download per op, tunnelled.
func BenchmarkBulk(b *testing.B) {
	body := make([]byte, 64<<20)
	rig := newRig(b, body, false)
	for _, via := range []bool{false, true} {
		name := "direct"
		if via {
			name = "proxy"
		}
		b.Run(name, func(b *testing.B) {
			c := rig.client(via, true)
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for range b.N {
				resp, err := c.Get(rig.srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != int64(len(body)) {
					b.Fatalf("got %d bytes", n)
				}
			}
		})
	}
}

// BenchmarkMaskedBulk: one 16 MiB HTTPS download per op from a host a secret is bound to,
// through the proxy (TLS terminated, the body streamed through the mask) and directly. The
// body is API-like text: pretty-printed JSON with URLs, escapes and wrapped base64.
func BenchmarkMaskedBulk(b *testing.B) {
	var body bytes.Buffer
	blob := make([]byte, 300)
	for i := 0; body.Len() < 16<<20; i++ {
		if i%50 == 0 {
			for j := range blob {
				blob[j] = byte(i * j)
			}
			s := base64.StdEncoding.EncodeToString(blob)
			for len(s) > 76 {
				body.WriteString(s[:76] + "\n")
				s = s[76:]
			}
			body.WriteString(s + "\n")
			continue
		}
		fmt.Fprintf(&body, "  {\n    \"id\": \"it%08d\",\n    \"url\": \"https://api.example.com/v1/items/%d?q=a%%20b&sort=desc\",\n    \"title\": \"Caf\\u00e9 item %d\"\n  },\n", i, i, i)
	}
	rig := newRig(b, body.Bytes()[:16<<20], true)
	for _, via := range []bool{false, true} {
		name := "direct"
		if via {
			name = "proxy"
		}
		b.Run(name, func(b *testing.B) {
			c := rig.client(via, true)
			b.SetBytes(16 << 20)
			for b.Loop() {
				resp, err := c.Get(rig.srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				// The bench's value ends in "0123456789", so an id such as "it01234567"
				// holds a piece of it and is masked: a few hundred bytes fewer.
				if n < 16<<20-4096 {
					b.Fatalf("got %d bytes", n)
				}
			}
		})
	}
}
