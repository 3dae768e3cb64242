package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/peercred"
)

// declineAll is a Handoff that declines everything it is asked: the benchmarks measure the
// way to Prepare, not a dispatch.
type declineAll struct{}

func (declineAll) Prepare(context.Context, *api.HandoffRequest, api.Peer) (func(context.Context, func(api.HandoffFrame) error), error) {
	return nil, &api.Declined{Why: "benchmark"}
}

// BenchmarkCallerWidens is the hand-off decision's own work for one request, in process: a
// challenge issued, answered (readlink) and checked, the caller's and this process's
// security contexts read and compared.
func BenchmarkCallerWidens(b *testing.B) {
	s := &Server{Handoff: declineAll{}}
	me := int32(os.Getpid())
	for b.Loop() {
		fd, err := s.prover.Issue(me, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		secret, err := callerctx.Answer(me, fd)
		if err != nil {
			b.Fatal(err)
		}
		if why := s.callerWidens(peerInfo{ok: true, pid: me}, &api.HandoffRequest{ProofFD: fd, Proof: secret}); why != "" {
			b.Fatal(why)
		}
	}
}

// BenchmarkHandoffAsked is what a CLI pays, over serve's socket, to be answered a hand-off:
// baseline, one request (as before the proof: the hand-off's own, here a 404 of the cancel
// route); proof, the challenge asked and answered, then the hand-off request that reaches
// Prepare.
func BenchmarkHandoffAsked(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&Server{Handoff: declineAll{}}).Serve(ctx, ln)
	var peer int32
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
		if err == nil {
			cred, _ := peercred.Of(c)
			peer = cred.Pid
		}
		return c, err
	}}}
	post := func(path string, body []byte) (int, []byte) {
		resp, err := hc.Post("http://agora"+path, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, got
	}
	b.Run("baseline", func(b *testing.B) {
		for b.Loop() {
			if status, _ := post("/v1/handoff/none/cancel", nil); status != http.StatusNotFound {
				b.Fatal(status)
			}
		}
	})
	b.Run("proof", func(b *testing.B) {
		for b.Loop() {
			_, got := post(api.HandoffProofPath, nil)
			var ch api.HandoffChallenge
			if err := json.Unmarshal(got, &ch); err != nil {
				b.Fatal(err)
			}
			secret, err := callerctx.Answer(peer, ch.FD)
			if err != nil {
				b.Fatal(err)
			}
			body := fmt.Sprintf(`{"home":"/h","exe":"/e","env":"x","subagent":"s","budget":{},"proof_fd":%d,"proof":%q}`, ch.FD, secret)
			if status, got := post(api.HandoffPath, []byte(body)); status != http.StatusConflict || !bytes.Contains(got, []byte("benchmark")) {
				b.Fatalf("%d %s", status, got)
			}
		}
	})
}
