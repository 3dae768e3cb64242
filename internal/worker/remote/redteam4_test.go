package remote

import (
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// TestRedTeam4_PackFailureIsNotAnOutage: an upload whose body the worker cannot make (Pack
// fails: here the out directory is gone) failed on the worker's side, not the gateway's. It
// is not retried and not reported as an UnreachableError: before the fix the worker repacked
// for OutageLimit and exited 75, which the host records gateway-unreachable, blaming nobody
// for what happened in the pod (netgw's TestRedTeam4_UnreadableOutputIsNotAGatewayOutage is
// the agent's way to get there).
func TestRedTeam4_PackFailureIsNotAnOutage(t *testing.T) {
	defer func(d time.Duration) { OutageLimit = d }(OutageLimit)
	OutageLimit = 2 * time.Second
	var puts atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		puts.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := NewClient(srv.URL, "01RT4PACK", "agw_test", ca)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.tls.ServerName = "example.com"
	err = c.Upload(t.Context(), remote.Mount{Name: "out", Dst: "/agora/out", Result: true}, filepath.Join(t.TempDir(), "gone"))
	if err == nil {
		t.Fatal("the upload of a directory that is not there succeeded")
	}
	if errors.As(err, new(*UnreachableError)) || ExitCode(err) == remote.ExitGatewayUnreachable {
		t.Fatalf("a packing failure was reported as the gateway's outage: %v", err)
	}
	if n := puts.Load(); n > 1 {
		t.Errorf("the failed upload was sent %d times", n)
	}
}
