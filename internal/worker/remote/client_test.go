package remote

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// dropFirst closes the first n connections it accepts at once, as the gateway does to the
// oldest unauthenticated connection when a pool is full.
type dropFirst struct {
	net.Listener
	n atomic.Int32
}

func (l *dropFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.n.Add(-1) < 0 {
			return c, err
		}
		c.Close()
	}
}

// TestClient_GetRetriesAClosedConnection: a request whose connection the gateway closed
// before answering is retried, so a pod that lost its pending connection to a flooding
// neighbour still starts. An upload is retried too, with its body made afresh: the gateway
// answers a repeated upload of the same bytes as the first (netgw's upload marks).
func TestClient_GetRetriesAClosedConnection(t *testing.T) {
	var gets, puts atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			puts.Add(1)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		gets.Add(1)
		json.NewEncoder(w).Encode(remote.Info{Dispatch: "01RETRY"})
	}))
	drop := &dropFirst{Listener: srv.Listener}
	drop.n.Store(2)
	srv.Listener = drop
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := NewClient(srv.URL, "01RETRY", "agw_test", ca)
	if err != nil {
		t.Fatal(err)
	}
	c.tls.ServerName = "example.com" // httptest's certificate names example.com and 127.0.0.1
	c.tls.MinVersion = 0
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatalf("Info after two closed connections: %v", err)
	}
	if info.Dispatch != "01RETRY" || gets.Load() != 1 {
		t.Fatalf("Info = %+v after %d GETs served, want one", info, gets.Load())
	}

	drop.n.Store(1)
	c.Close() // a fresh connection, which the listener closes
	bodies := 0
	resp, err := c.do(t.Context(), http.MethodPut, "mounts/out", func() io.ReadCloser {
		bodies++
		return io.NopCloser(strings.NewReader("tar"))
	}, http.StatusNoContent)
	if err != nil {
		t.Fatalf("a PUT after a closed connection: %v", err)
	}
	resp.Body.Close()
	if puts.Load() != 1 || bodies != 2 {
		t.Errorf("the PUT reached the handler %d times from %d bodies, want once from 2 (one per attempt)", puts.Load(), bodies)
	}
}
