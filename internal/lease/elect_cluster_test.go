package lease

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agora-dev/agora/internal/k8stest"
)

const testDuration = 3 * time.Second

var leaseSeq atomic.Int64

// testLease is a fresh Lease name and a config for identity on the shared cluster.
func testLease(t *testing.T, kubeconfig, identity string) Config {
	c := k8stest.Shared(t, k8stest.Options{})
	if kubeconfig == "" {
		kubeconfig = c.Kubeconfig
	}
	return Config{Name: fmt.Sprintf("lease-%d-%d", os.Getpid(), leaseSeq.Add(1)), Namespace: c.Namespace,
		Kubeconfig: kubeconfig, Identity: identity, Duration: testDuration}
}

func leases(t *testing.T, kubeconfig string) coordinationv1.CoordinationV1Interface {
	rc, err := restConfig(kubeconfig, testDuration)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := coordinationv1.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestElect_ReleaseHandsOver: a second replica waits while the first leads, and takes the
// Lease once the first releases it; the first's fence is shut before that. The second may
// even carry the first's identity (a replica started twice by mistake, or a restarted one
// while the old process lives): a record this process did not write is never renewed as its
// own.
func TestElect_ReleaseHandsOver(t *testing.T) {
	for _, c := range []struct{ name, second, previous string }{
		{"another identity", "replica-b", "replica-a"},
		{"the same identity", "replica-a", "replica-a"}, // another process's record, though of this name
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testLease(t, "", "replica-a")
			a, err := Elect(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Fence.Check(); err != nil {
				t.Fatalf("the leader's fence: %v", err)
			}
			cfgB := cfg
			cfgB.Identity = c.second
			got := make(chan *Leader, 1)
			go func() {
				b, err := Elect(t.Context(), cfgB)
				if err != nil {
					t.Error(err)
				}
				got <- b
			}()
			// B must still be waiting after several of its retries while A renews.
			select {
			case <-got:
				t.Fatal("a standby took the Lease while its holder renewed it")
			case <-time.After(2 * testDuration):
			}
			if err := a.Fence.Check(); err != nil {
				t.Fatalf("the leader's fence while a standby waits: %v", err)
			}
			a.Release()
			if err := a.Fence.Check(); err == nil {
				t.Fatal("the released leader's fence is open")
			}
			b := <-got
			if b == nil {
				return
			}
			defer b.Release()
			if b.Previous != c.previous {
				t.Errorf("previous holder %q, want %q", b.Previous, c.previous)
			}
			if err := b.Fence.Check(); err != nil {
				t.Errorf("the new leader's fence: %v", err)
			}
		})
	}
}

// TestElect_ForeignHolderNotTakenEarly is the attack of taking a Lease another identity holds:
// while the foreign holder renews, Elect waits; once it stops, Elect takes the Lease only
// after the lease duration passed since the last renew it saw.
func TestElect_ForeignHolderNotTakenEarly(t *testing.T) {
	cfg := testLease(t, "", "agora-0")
	cl := leases(t, cfg.Kubeconfig).Leases(cfg.Namespace)
	secs := int32(testDuration / time.Second)
	holder := "someone-else"
	now := metav1.NewMicroTime(time.Now())
	l, err := cl.Create(t.Context(), &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: cfg.Name},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		renewing  = true
		lastRenew = time.Now()
	)
	stop := make(chan struct{})
	go func() { // the foreign holder renews every second for 3 durations, then dies
		defer close(stop)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; i < 3*int(secs); i++ {
			<-tick.C
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			// err is the goroutine's own: the test's err is written by Elect concurrently.
			next, err := cl.Update(context.Background(), l, metav1.UpdateOptions{})
			if err != nil {
				t.Errorf("foreign renew: %v", err)
				return
			}
			l = next
			mu.Lock()
			lastRenew = time.Now()
			mu.Unlock()
		}
		mu.Lock()
		renewing = false
		mu.Unlock()
	}()
	leader, err := Elect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Release()
	mu.Lock()
	defer mu.Unlock()
	if renewing {
		t.Fatal("Elect took a Lease its foreign holder was still renewing")
	}
	if held := leader.Acquired.Sub(lastRenew); held < testDuration {
		t.Errorf("Elect took the Lease %s after the foreign holder's last renew, before its %s duration", held, testDuration)
	}
	if leader.Previous != holder {
		t.Errorf("previous holder %q, want %q", leader.Previous, holder)
	}
	<-stop
}

// TestElect_HungAPIServerFences is the attack of an apiserver that stops answering while
// agora leads: the leader must shut its own fence and report the loss, not wait for the
// apiserver for ever.
func TestElect_HungAPIServerFences(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{})
	p := newStallProxy(t, c.Server)
	kc := rewriteServer(t, c.Kubeconfig, "https://"+p.addr())
	cfg := testLease(t, kc, "agora-0")
	leader, err := Elect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Release()
	if err := leader.Fence.Check(); err != nil {
		t.Fatal(err)
	}
	p.stall()
	select {
	case <-leader.Lost():
	case <-time.After(20 * testDuration): // a bound for a broken build, not a timing assertion
		t.Fatal("the leader did not give up the Lease with its apiserver hung")
	}
	if err := leader.Fence.Check(); err == nil {
		t.Fatal("the fence is open after the loss")
	}
}

// stallProxy forwards TCP to the apiserver until stall, after which it holds every
// connection, old and new, without forwarding a byte: an apiserver that hangs.
type stallProxy struct {
	ln      net.Listener
	stalled atomic.Bool
}

func newStallProxy(t *testing.T, server string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	target := server[len("https://"):]
	p := &stallProxy{ln: ln}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(in, target)
		}
	}()
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }
func (p *stallProxy) stall()       { p.stalled.Store(true) }

func (p *stallProxy) forward(in net.Conn, target string) {
	defer in.Close()
	if p.stalled.Load() {
		io.Copy(io.Discard, in)
		return
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if p.stalled.Load() {
				continue // swallowed: the peer waits for an answer that never comes
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go pipe(out, in)
	pipe(in, out)
}

// rewriteServer copies kubeconfig with its clusters pointing at server (same CA and names).
func rewriteServer(t *testing.T, kubeconfig, server string) string {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	path := filepath.Join(t.TempDir(), "proxied.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
