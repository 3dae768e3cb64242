package remote

import (
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// TestClient_GivesUpAsUnreachable: a gateway that does not answer for OutageLimit ends the
// request with an UnreachableError, which the worker and its fetch step exit
// remote.ExitGatewayUnreachable for; the attempts in between are paced, not a busy loop.
func TestClient_GivesUpAsUnreachable(t *testing.T) {
	defer func(d time.Duration) { OutageLimit = d }(OutageLimit)
	OutageLimit = 1500 * time.Millisecond
	addr := agoratest.FreeAddr(t) // nothing listens there: every dial is refused
	c, err := NewClient("https://"+addr, "01UNREACHABLE", "agw_test", testCA(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.Info(t.Context())
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("Info of a gateway that never answers: %v, want an UnreachableError", err)
	}
	if took := time.Since(start); took < OutageLimit {
		t.Errorf("gave up after %s, before the outage limit %s", took, OutageLimit)
	}
	if got := ExitCode(err); got != remote.ExitGatewayUnreachable {
		t.Errorf("ExitCode = %d, want %d", got, remote.ExitGatewayUnreachable)
	}
	if got := ExitCode(errors.New("upload refused")); got != 1 {
		t.Errorf("ExitCode of another error = %d, want 1", got)
	}
}

// testCA is a PEM certificate for NewClient (httptest's; nothing is verified against it here).
func testCA(t *testing.T) []byte {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}
