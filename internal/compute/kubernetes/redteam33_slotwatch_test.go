package kubernetes

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/k8stest"
)

// stallProxy forwards TCP to the apiserver until stalled: from then on every connection it has,
// and every one it accepts until resumed, is kept open and answered never (what it reads is
// dropped), as a hung apiserver or a stuck proxy in front of it does. Connections accepted
// after resume forward again; the stalled ones stay silent for ever.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	stall  bool
	conns  []*stallConn
}

type stallConn struct {
	mu   sync.Mutex
	dead bool
}

func (c *stallConn) isDead() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.dead }

func startStallProxy(t *testing.T, target string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	var open sync.WaitGroup
	var all []net.Conn
	var allMu sync.Mutex
	closed := false
	t.Cleanup(func() {
		ln.Close()
		allMu.Lock()
		closed = true
		for _, c := range all {
			c.Close()
		}
		allMu.Unlock()
		open.Wait()
	})
	open.Add(1)
	go func() {
		defer open.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			allMu.Lock()
			if closed {
				allMu.Unlock()
				in.Close()
				out.Close()
				return
			}
			all = append(all, in, out)
			open.Add(2)
			allMu.Unlock()
			sc := &stallConn{}
			p.mu.Lock()
			sc.dead = p.stall
			p.conns = append(p.conns, sc)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer open.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !sc.isDead() {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						dst.Close()
						return
					}
				}
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	return p
}

// stallAll makes every connection silent for ever, and new ones until resume.
func (p *stallProxy) stallAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = true
	for _, c := range p.conns {
		c.mu.Lock()
		c.dead = true
		c.mu.Unlock()
	}
}

func (p *stallProxy) resume() {
	p.mu.Lock()
	p.stall = false
	p.mu.Unlock()
}

// An attack on a waiting slot's pod watch: the apiserver stops
// answering. Its pod is deleted while the apiserver (here a proxy in front of it) holds every
// connection open and answers nothing; then new connections are answered again. The watch
// must find its way to a live connection and count the slot gone. Over HTTP/1.1 (an apiserver
// behind a proxy that speaks no HTTP/2, or DISABLE_HTTP2 set, which client-go honours) no
// health check ends the silent watch: it waited for ever and the slot counted ready.
func TestRedTeam33_SlotWatchSurvivesAStalledAPIServer(t *testing.T) {
	t.Setenv("DISABLE_HTTP2", "1")
	c := k8stest.Shared(t, k8stest.Options{})
	proxy := startStallProxy(t, strings.TrimPrefix(c.Server, "https://"))
	kc, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	proxied := filepath.Join(t.TempDir(), "kubeconfig")
	// Its own TLS server name (a name the apiserver's certificate holds) gives this client its own
	// transport: client-go caches transports by TLS settings alone, weakly, so a transport an
	// earlier test made for the same cluster, if not yet collected, was handed back with
	// HTTP/2, whose 45 s health check outlasts the 40 s below (the test failed or passed with
	// the garbage collector's timing).
	if err := os.WriteFile(proxied, []byte(strings.ReplaceAll(string(kc), `"`+c.Server+`"`,
		`"https://`+proxy.ln.Addr().String()+`","tls-server-name":"localhost"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startSlotGW(t)
	o := testOptions(t, &fakeExporter{})
	o.Kubeconfig, o.Namespace = proxied, c.Namespace
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	p.opts.Exporter = g.reg
	p.testOnlyPodMeta = failWith(0, "1h")
	p.testOnlyWatchWait = 2 * time.Second
	watching := make(chan struct{}, 1)
	p.testOnlyWatching = func() {
		select {
		case watching <- struct{}{}:
		default:
		}
	}
	nodeSchedulable(t, p)
	sl, _ := startSlot(t, p, g)
	if !sl.Alive() {
		t.Fatal("a fresh slot is not alive")
	}
	select { // the watch is open
	case <-watching:
	case <-time.After(time.Minute):
		t.Fatal("the slot's pod watch never opened")
	}
	// A busy provider has many idle connections pooled: over HTTP/1.1 each silent one would
	// be tried in turn, a bound's wait apiece, after the apiserver answers again (past the
	// 40 s; without closeIdle, 20 pooled here fail every run).
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelSlot + "=" + sl.ID})
		})
	}
	wg.Wait()
	proxy.stallAll()
	cs := fullClient(t)
	l, err := cs.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelSlot + "=" + sl.ID})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("the slot's pods: %v, %v", l, err)
	}
	if err := cs.CoreV1().Pods(p.ns).Delete(t.Context(), l.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
		t.Fatal(err)
	}
	// The pod went while the apiserver was silent; it answers new connections again now,
	// while the watch's connection and the pooled ones stay silent for ever.
	proxy.resume()
	select {
	case <-sl.Gone():
	case <-time.After(40 * time.Second):
		t.Fatal("the slot's pod was deleted while the apiserver did not answer; 40 s after it answers again, the slot still counts ready")
	}
	if sl.Alive() {
		t.Error("a slot whose pod is gone is alive")
	}
}
