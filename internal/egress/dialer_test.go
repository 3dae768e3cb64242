package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var allowLoopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

func TestDialer_DialContext_RefusesBeforeDialing(t *testing.T) {
	r := newFakeResolver(map[string][][]netip.Addr{
		"mixed.test":    {addrs("1.1.1.1", "10.0.0.1")},
		"mapped.test":   {addrs("::ffff:10.0.0.1")},
		"metadata.test": {addrs("169.254.169.254")},
		"zoned.test":    {addrs("fe80::1%eth0")},
		"v6local.test":  {addrs("2606:4700::1111", "fd00::1")},
	})
	tests := []struct {
		name   string
		addr   string
		reason string
		denied string // the address the refusal names
		host   string // the host the refusal names
	}{
		{"public then private answer", "mixed.test:443", "RFC 1918", "10.0.0.1", "mixed.test"},
		{"ipv4-mapped private answer is unmapped", "mapped.test:443", "RFC 1918", "10.0.0.1", "mapped.test"},
		{"metadata answer", "metadata.test:80", "metadata", "169.254.169.254", "metadata.test"},
		{"zoned answer", "zoned.test:80", "zone", "fe80::1%eth0", "zoned.test"},
		{"public then unique-local v6 answer", "v6local.test:443", "unique local", "fd00::1", "v6local.test"},
		{"uppercase name is lowercased", "MIXED.test:443", "RFC 1918", "10.0.0.1", "mixed.test"},
		{"loopback literal", "127.0.0.1:80", "loopback", "127.0.0.1", "127.0.0.1"},
		{"loopback v6 literal", "[::1]:80", "loopback", "::1", "::1"},
		{"zone literal", "[fe80::1%eth0]:80", "zone", "fe80::1%eth0", "fe80::1%eth0"},
		{"decimal literal", "2130706433:80", "non-canonical IPv4", "127.0.0.1", "2130706433"},
		{"hex literal", "0x7f.1:80", "non-canonical IPv4", "127.0.0.1", "0x7f.1"},
		{"trailing dot literal", "127.0.0.1.:80", "non-canonical IPv4", "127.0.0.1", "127.0.0.1."},
		{"non-ascii name", "bücher.de:443", "IDNA", "", "bücher.de"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, log := newTestDialer(t, Policy{}, r)
			conn, err := d.DialContext(t.Context(), "tcp", tt.addr)
			if conn != nil {
				conn.Close()
			}
			de := wantDenied(t, err, tt.reason, tt.denied)
			if de.Host != tt.host {
				t.Errorf("got Host %q, want %q", de.Host, tt.host)
			}
			if !strings.Contains(err.Error(), tt.host) {
				t.Errorf("error %q does not name host %q", err, tt.host)
			}
			if got := log.get(); len(got) != 0 {
				t.Errorf("dialed %v, want no dial at all", got)
			}
		})
	}
}

func TestDialer_DialContext_LiteralIsNotResolved(t *testing.T) {
	srv := newCountingServer(t, nil)
	d, log := newTestDialer(t, Policy{AllowPrivate: allowLoopback}, noResolver(t))
	conn, err := d.DialContext(t.Context(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial %s: %v", srv.Listener.Addr(), err)
	}
	conn.Close()
	if diff := cmp.Diff([]string{srv.Listener.Addr().String()}, log.get()); diff != "" {
		t.Errorf("dials (-want +got):\n%s", diff)
	}
}

// TestDialer_DialContext_ResolvesOnce shows a name is resolved once per dial and the
// connection goes to the literal address that was vetted: the resolver's later answers (a
// rebinding to a loopback or metadata address) are never consulted for that connection.
func TestDialer_DialContext_ResolvesOnce(t *testing.T) {
	t.Run("first answer public", func(t *testing.T) {
		r := newFakeResolver(map[string][][]netip.Addr{
			"rebind.test": {addrs("1.1.1.1"), addrs("127.0.0.1")},
		})
		d, log := newTestDialer(t, Policy{}, r)
		_, err := d.DialContext(t.Context(), "tcp", "rebind.test:443")
		// The test dialer refuses to really connect to 1.1.1.1; what matters is where it went.
		if !errors.Is(err, errNotDialed) {
			t.Fatalf("got %v, want the test dialer's refusal to reach 1.1.1.1", err)
		}
		if diff := cmp.Diff([]string{"1.1.1.1:443"}, log.get()); diff != "" {
			t.Errorf("dials (-want +got):\n%s", diff)
		}
		if got := r.callsTo("rebind.test"); got != 1 {
			t.Errorf("got %d lookups, want 1", got)
		}
	})

	t.Run("http through a name", func(t *testing.T) {
		srv := newCountingServer(t, nil)
		r := newFakeResolver(map[string][][]netip.Addr{
			"svc.test": {addrs("127.0.0.1"), addrs("169.254.169.254")},
		})
		d, log := newTestDialer(t, Policy{AllowPrivate: allowLoopback}, r)
		c := d.Client(0)
		defer c.CloseIdleConnections()
		url := fmt.Sprintf("http://svc.test:%d/", srv.port())

		status, err := get(t, c, url)
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET %s: got %d, %v, want 200", url, status, err)
		}
		if got, want := srv.lastHost.Load(), fmt.Sprintf("svc.test:%d", srv.port()); got != want {
			t.Errorf("server saw Host %v, want %s", got, want)
		}
		wantDials := []string{fmt.Sprintf("127.0.0.1:%d", srv.port())}
		if diff := cmp.Diff(wantDials, log.get()); diff != "" {
			t.Errorf("dials (-want +got):\n%s", diff)
		}
		if got := r.callsTo("svc.test"); got != 1 {
			t.Errorf("got %d lookups, want 1", got)
		}

		// A new connection resolves again and vets the new answer.
		c.CloseIdleConnections()
		_, err = get(t, c, url)
		wantDenied(t, err, "metadata", "169.254.169.254")
		if diff := cmp.Diff(wantDials, log.get()); diff != "" {
			t.Errorf("dials after rebinding (-want +got):\n%s", diff)
		}
		if got := srv.hits.Load(); got != 1 {
			t.Errorf("server got %d requests, want 1", got)
		}
	})

	t.Run("same dial without an allow-list", func(t *testing.T) {
		srv := newCountingServer(t, nil)
		r := newFakeResolver(map[string][][]netip.Addr{"svc.test": {addrs("127.0.0.1")}})
		d, log := newTestDialer(t, Policy{}, r)
		c := d.Client(0)
		defer c.CloseIdleConnections()
		_, err := get(t, c, fmt.Sprintf("http://svc.test:%d/", srv.port()))
		de := wantDenied(t, err, "loopback", "127.0.0.1")
		if de.Host != "svc.test" {
			t.Errorf("got Host %q, want svc.test", de.Host)
		}
		if got := log.get(); len(got) != 0 {
			t.Errorf("dialed %v, want no dial", got)
		}
		if got := srv.hits.Load(); got != 0 {
			t.Errorf("server got %d requests, want 0", got)
		}
	})

	t.Run("ipv4-mapped answer dialed unmapped", func(t *testing.T) {
		srv := newCountingServer(t, nil)
		r := newFakeResolver(map[string][][]netip.Addr{"svc.test": {addrs("::ffff:127.0.0.1")}})
		d, log := newTestDialer(t, Policy{AllowPrivate: allowLoopback}, r)
		conn, err := d.DialContext(t.Context(), "tcp", fmt.Sprintf("svc.test:%d", srv.port()))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conn.Close()
		if diff := cmp.Diff([]string{fmt.Sprintf("127.0.0.1:%d", srv.port())}, log.get()); diff != "" {
			t.Errorf("dials (-want +got):\n%s", diff)
		}
	})
}

func TestDialer_DialContext_Errors(t *testing.T) {
	errLookup := errors.New("servfail")
	r := resolverFunc(func(_ context.Context, network, host string) ([]netip.Addr, error) {
		switch host {
		case "empty.test":
			return nil, nil
		case "fail.test":
			return nil, errLookup
		case "v4.test":
			if network != "ip4" {
				return nil, fmt.Errorf("got lookup network %q, want ip4", network)
			}
			return addrs("10.0.0.1"), nil
		}
		return nil, errNoSuchHost
	})
	tests := []struct {
		name    string
		network string
		addr    string
		want    string
		is      error
	}{
		{"no port", "tcp", "svc.test", "missing port", nil},
		{"named port", "tcp", "svc.test:http", `port "http"`, nil},
		{"port out of range", "tcp", "svc.test:65536", `port "65536"`, nil},
		{"negative port", "tcp", "svc.test:-1", `port "-1"`, nil},
		{"udp", "udp", "svc.test:53", `network "udp" not supported`, nil},
		{"unix", "unix", "/tmp/sock", `network "unix" not supported`, nil},
		{"empty host", "tcp", ":80", "empty host", ErrDenied},
		{"no addresses", "tcp", "empty.test:80", `resolve "empty.test": no addresses`, nil},
		{"lookup error is kept", "tcp", "fail.test:80", `resolve "fail.test"`, errLookup},
		{"tcp4 looks up ip4", "tcp4", "v4.test:80", "RFC 1918", ErrDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, log := newTestDialer(t, Policy{}, r)
			conn, err := d.DialContext(t.Context(), tt.network, tt.addr)
			if conn != nil {
				conn.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("got %v, want it to match %v", err, tt.is)
			}
			if tt.is != ErrDenied && errors.Is(err, ErrDenied) {
				t.Errorf("got %v, want it not to match ErrDenied", err)
			}
			if got := log.get(); len(got) != 0 {
				t.Errorf("dialed %v, want no dial", got)
			}
		})
	}
}

func TestDialer_DialContext_HonoursContext(t *testing.T) {
	t.Run("cancel during lookup", func(t *testing.T) {
		started := make(chan struct{})
		r := resolverFunc(func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		d, log := newTestDialer(t, Policy{}, r)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := d.DialContext(ctx, "tcp", "slow.test:443")
			errc <- err
		}()
		<-started
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if got := log.get(); len(got) != 0 {
			t.Errorf("dialed %v, want no dial", got)
		}
	})

	t.Run("cancelled before connect", func(t *testing.T) {
		srv := newCountingServer(t, nil)
		d, _ := newTestDialer(t, Policy{AllowPrivate: allowLoopback}, noResolver(t))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		conn, err := d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
		if conn != nil {
			conn.Close()
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
}

func TestNewDialer(t *testing.T) {
	t.Run("net dialer has timeout and keep-alive", func(t *testing.T) {
		nd := newNetDialer()
		if nd.Timeout != dialTimeout || nd.Timeout <= 0 {
			t.Errorf("got Timeout %v, want %v", nd.Timeout, dialTimeout)
		}
		if nd.KeepAlive != keepAlive || nd.KeepAlive <= 0 {
			t.Errorf("got KeepAlive %v, want %v", nd.KeepAlive, keepAlive)
		}
	})
	t.Run("nil resolver is the default resolver", func(t *testing.T) {
		if d := NewDialer(Policy{}, nil); d.resolver != net.DefaultResolver {
			t.Errorf("got resolver %v, want net.DefaultResolver", d.resolver)
		}
	})
	t.Run("policy is copied", func(t *testing.T) {
		p := Policy{
			AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
			Hosts:        []string{"a.example.com"},
		}
		d := NewDialer(p, nil)
		p.AllowPrivate[0] = netip.MustParsePrefix("127.0.0.0/8")
		p.Hosts[0] = "b.example.com"
		if err := d.policy.CheckHost("b.example.com"); err == nil {
			t.Errorf("a later edit of Hosts reached the dialer")
		}
		if err := d.policy.CheckAddr(netip.MustParseAddr("127.0.0.1")); err == nil {
			t.Errorf("a later edit of AllowPrivate reached the dialer")
		}
	})
	t.Run("empty hosts stays empty, not nil", func(t *testing.T) {
		d := NewDialer(Policy{Hosts: []string{}}, nil)
		wantDenied(t, d.CheckURL(mustParseURL(t, "https://api.example.com/")), "not in the allowed hosts", "")
	})
}

// TestDialer_DialContext_Connects proves a dialed connection is live with a raw HTTP exchange.
func TestDialer_DialContext_Connects(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pong") })
	r := newFakeResolver(map[string][][]netip.Addr{"svc.test": {addrs("127.0.0.1")}})
	d, _ := newTestDialer(t, Policy{AllowPrivate: allowLoopback}, r)
	conn, err := d.DialContext(t.Context(), "tcp", fmt.Sprintf("svc.test:%d", srv.port()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if got := conn.RemoteAddr().String(); got != srv.Listener.Addr().String() {
		t.Errorf("connected to %s, want %s", got, srv.Listener.Addr())
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: svc.test\r\nConnection: close\r\n\r\n")
	body, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !strings.HasSuffix(string(body), "pong") {
		t.Errorf("got response %q, want it to end in pong", body)
	}
}
