package service_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// callbackSink counts the POSTs it gets by their delivery id (X-Agora-Delivery).
type callbackSink struct {
	mu  sync.Mutex
	ids map[string]int
	n   int
}

func (c *callbackSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	c.mu.Lock()
	c.ids[r.Header.Get("X-Agora-Delivery")]++
	c.n++
	c.mu.Unlock()
}

func (c *callbackSink) dups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id, n := range c.ids {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", id, n))
		}
	}
	sort.Strings(out)
	return out
}

// TestRedTeam31_WarmHandoffCallbacksOnce: `agora dispatch run --callback URL` handed to serve
// for a warm target runs in a standby supervisor, which delivers the dispatch's callbacks
// when it ends; serve, following the record for the CLI, delivers them too. Each lifecycle
// event must reach the receiver once, as it does from the one-shot CLI (AGORA_NO_HANDOFF=1).
func TestRedTeam31_WarmHandoffCallbacksOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	sink := &callbackSink{ids: map[string]int{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	e := probeEnv(t)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString("targets:\n  local:\n    warm: 1\negress:\n  allow_private: [127.0.0.1/32]\n")
	must(t, err)
	must(t, f.Close())
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	e.runPlan("cold", "probe")
	waitStandbys(t, e, 1)
	settle := func(want int) {
		agoratest.WaitFor(t, 30*time.Second, "the callbacks", func() bool {
			sink.mu.Lock()
			defer sink.mu.Unlock()
			return len(sink.ids) >= want
		})
		time.Sleep(time.Second) // a second delivery, if any, comes from a flush already under way
	}

	e.oneShotID([]string{"AGORA_NO_HANDOFF=1"}, "--callback", srv.URL+"/in-process")
	settle(1)
	if d := sink.dups(); len(d) > 0 {
		t.Fatalf("the one-shot CLI delivered callbacks twice: %v", d)
	}
	sink.mu.Lock()
	inProc := len(sink.ids)
	sink.mu.Unlock()

	before := e.handoffs()
	id := e.oneShotID(nil, "--callback", srv.URL+"/handed-off")
	if e.handoffs() != before+1 {
		t.Fatalf("not handed off")
	}
	db := openAgoraDB(t, e)
	var sup string
	must(t, db.SQL().QueryRow(`SELECT supervisor FROM dispatches WHERE id = ?`, id).Scan(&sup))
	settle(2 * inProc)
	if d := sink.dups(); len(d) > 0 {
		t.Errorf("the handed-off dispatch %s (supervisor %s) had callbacks delivered more than once: %s", id, sup, strings.Join(d, ", "))
	}
}
