package netgw

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// withSlots gives the gateway a slots directory beside its sessions.
func withSlots(t testing.TB, set func(*Server)) *gw {
	t.Helper()
	var slots *Slots
	g := startGatewayWith(t, workerVersion(), func(s *Server) {
		if slots == nil {
			slots = &Slots{Dir: filepath.Join(filepath.Dir(s.Registry.Dir), "slots")}
		}
		s.Slots = slots
		if set != nil {
			set(s)
		}
	})
	return g
}

func (g *gw) slots() *Slots { return g.srv.Slots }

// exportBare exports a dispatch with no binds and no files: enough for a claim.
func (g *gw) exportBare(t testing.TB, id string) *remote.Session {
	t.Helper()
	s, err := g.reg.Export(context.Background(), compute.Spec{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newSlot(t testing.TB, g *gw) *Slot {
	t.Helper()
	sl, err := g.slots().Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sl.Close() })
	return sl
}

// bindAsync binds id's session to sl and returns Bind's result on a channel.
func bindAsync(ctx context.Context, sl *Slot, s *remote.Session) <-chan error {
	done := make(chan error, 1)
	go func() { done <- sl.Bind(ctx, s.Dispatch, s.Token) }()
	return done
}

func claimPath(id string) string { return remote.SlotRoutePrefix + id + "/" + remote.ClaimRoute }

// A warm worker claims its slot and gets the bound dispatch: its client opens that
// dispatch's session, and the binder learns the slot was claimed.
func TestSlot_ClaimDeliversBoundDispatch(t *testing.T) {
	g := withSlots(t, nil)
	s := g.exportBare(t, "01WARM")
	sl := newSlot(t, g)
	bound := bindAsync(context.Background(), sl, s)
	c, err := workerremote.Claim(context.Background(), g.url, sl.ID, sl.Token, g.ca, nil)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	defer c.Close()
	if err := <-bound; err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if c.Dispatch() != "01WARM" {
		t.Fatalf("claimed dispatch %q, want 01WARM", c.Dispatch())
	}
	info, err := c.Info(context.Background())
	if err != nil || info.Dispatch != "01WARM" {
		t.Fatalf("the granted token does not open its session: %+v, %v", info, err)
	}
	if _, err := os.Stat(filepath.Join(g.slots().Dir, sl.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a claimed slot's directory stays: %v", err)
	}
	if strings.Contains(g.logs.String(), sl.Token) || strings.Contains(g.logs.String(), s.Token) {
		t.Fatal("a token reached the gateway's log")
	}
}

// Attack: the slot's token replayed after its claim is refused, and claims nothing more,
// even when the holder binds again (a slot is used once).
func TestSlot_ReplayAfterClaimRefused(t *testing.T) {
	g := withSlots(t, nil)
	s := g.exportBare(t, "01REPLAY")
	sl := newSlot(t, g)
	bound := bindAsync(context.Background(), sl, s)
	c, err := workerremote.Claim(context.Background(), g.url, sl.ID, sl.Token, g.ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-bound
	if code, body := g.do(t, http.MethodPost, claimPath(sl.ID), sl.Token, nil); code != http.StatusUnauthorized {
		t.Fatalf("replayed slot token: %d %q, want 401", code, body)
	}
	_, err = workerremote.Claim(context.Background(), g.url, sl.ID, sl.Token, g.ca, nil)
	var se *workerremote.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Fatalf("Claim replayed: %v, want a 401", err)
	}
	other := g.exportBare(t, "01REPLAY2")
	if err := sl.Bind(context.Background(), other.Dispatch, other.Token); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("a claimed slot was bound again: %v", err)
	}
}

// Attack: a slot's token is no dispatch's token: it opens no route of the dispatch bound to
// its slot (before or after the claim), of another dispatch, nor another slot's claim.
func TestSlot_TokenForOtherDispatchRefused(t *testing.T) {
	g := withSlots(t, func(s *Server) { s.ClaimWait = 200 * time.Millisecond })
	a, b := g.exportBare(t, "01SLOTA"), g.exportBare(t, "01SLOTB")
	slA, slB := newSlot(t, g), newSlot(t, g)
	for _, d := range []string{a.Dispatch, b.Dispatch} {
		if code, _ := g.do(t, http.MethodGet, remote.RoutePrefix+d+"/session", slA.Token, nil); code != http.StatusForbidden {
			t.Fatalf("slot token on %s's session: %d, want 403", d, code)
		}
	}
	boundB := bindAsync(context.Background(), slB, b)
	if code, body := g.do(t, http.MethodPost, claimPath(slB.ID), slA.Token, nil); code != http.StatusForbidden {
		t.Fatalf("slot A's token on slot B's claim: %d %q, want 403", code, body)
	}
	if code, _ := g.do(t, http.MethodPost, claimPath(slB.ID), b.Token, nil); code != http.StatusForbidden {
		t.Fatalf("dispatch B's own token on slot B's claim: %d, want 403", code)
	}
	// A's slot has nothing bound: its claim waits and says so, it does not get B.
	if code, _ := g.do(t, http.MethodPost, claimPath(slA.ID), slA.Token, nil); code != http.StatusNoContent {
		t.Fatalf("slot A's claim with nothing bound: %d, want 204", code)
	}
	c, err := workerremote.Claim(context.Background(), g.url, slB.ID, slB.Token, g.ca, nil)
	if err != nil || c.Dispatch() != b.Dispatch {
		t.Fatalf("slot B's claim: %v", err)
	}
	c.Close()
	<-boundB
	if code, _ := g.do(t, http.MethodGet, remote.RoutePrefix+b.Dispatch+"/session", slB.Token, nil); code != http.StatusForbidden {
		t.Fatalf("slot B's token on its claimed dispatch: %d, want 403", code)
	}
	for _, bad := range []string{"/v1/slots/" + slA.ID, "/v1/slots/" + slA.ID + "/claim/x", "/v1/slots/S" + slA.ID[1:] + "/claim", "/v1/slots/..%2F" + slA.ID + "/claim"} {
		if code, _ := g.do(t, http.MethodPost, bad, slA.Token, nil); code != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", bad, code)
		}
	}
	if code, _ := g.do(t, http.MethodGet, claimPath(slA.ID), slA.Token, nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET claim: %d, want 405", code)
	}
}

// 200 concurrent claims on 100 slots, each bound to its own dispatch, each slot's token used
// twice at once: each dispatch goes to exactly one claim, of the slot it was bound to; the
// other claim of each slot is refused.
func TestSlot_200ConcurrentClaimsNeverShare(t *testing.T) {
	const n = 100
	g := withSlots(t, func(s *Server) { s.MaxPendingPerSource, s.MaxPending = 4*n, 4*n })
	sessions := make([]*remote.Session, n)
	slots := make([]*Slot, n)
	for i := range n {
		sessions[i] = g.exportBare(t, fmt.Sprintf("01CONC%03d", i))
		slots[i] = newSlot(t, g)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		mu     sync.Mutex
		got    = map[string][]string{} // dispatch -> slots that claimed it
		refuse int
		wg     sync.WaitGroup
	)
	binds := make([]<-chan error, n)
	for i := range n {
		binds[i] = bindAsync(ctx, slots[i], sessions[i])
	}
	for i := range 2 * n {
		sl := slots[i%n]
		wg.Go(func() {
			c, err := workerremote.Claim(ctx, g.url, sl.ID, sl.Token, g.ca, nil)
			mu.Lock()
			defer mu.Unlock()
			var se *workerremote.StatusError
			switch {
			case err == nil:
				got[c.Dispatch()] = append(got[c.Dispatch()], sl.ID)
				c.Close()
			case errors.As(err, &se) && se.Code == http.StatusUnauthorized:
				refuse++
			default:
				t.Errorf("claim of %s: %v", sl.ID, err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		if err := <-binds[i]; err != nil {
			t.Errorf("bind %d: %v", i, err)
		}
		who := got[sessions[i].Dispatch]
		if len(who) != 1 || who[0] != slots[i].ID {
			t.Errorf("dispatch %s claimed by %v, want only its slot %s", sessions[i].Dispatch, who, slots[i].ID)
		}
	}
	if len(got) != n || refuse != n {
		t.Fatalf("%d dispatches claimed, %d claims refused; want %d and %d", len(got), refuse, n, n)
	}
}

// The slot's holder is a separate process, killed with -9: its slot (bound to a dispatch or
// not) is never claimed afterwards, and Sweep removes what is left of it.
const slotHolderEnv = "AGORA_NETGW_TEST_SLOT_HOLDER"

// slotHolderMain makes a slot in the directory the environment names, says its id and token
// on stdout, binds the dispatch named on stdin (with its token) when there is one, and waits
// to be killed.
func slotHolderMain() int {
	sl, err := (&Slots{Dir: os.Getenv(slotHolderEnv)}).Create(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s %s\n", sl.ID, sl.Token)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if id, token, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
		sl.Bind(context.Background(), id, token)
	}
	select {}
}

func TestSlot_HolderKilled9NeverReused(t *testing.T) {
	for _, bind := range []bool{false, true} {
		t.Run(fmt.Sprintf("bound=%v", bind), func(t *testing.T) {
			g := withSlots(t, nil)
			s := g.exportBare(t, "01KILLED")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), slotHolderEnv+"="+g.slots().Dir)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			must(t, cmd.Start())
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			id, token, _ := strings.Cut(strings.TrimSpace(line), " ")
			if bind {
				fmt.Fprintf(stdin, "%s %s\n", s.Dispatch, s.Token)
				agoratest.WaitFor(t, 10*time.Second, "the slot's socket", func() bool {
					_, err := os.Lstat(filepath.Join(g.slots().Dir, id, slotSocket))
					return err == nil
				})
			} else {
				stdin.Close()
			}
			must(t, cmd.Process.Signal(syscall.SIGKILL))
			cmd.Wait()
			if code, body := g.do(t, http.MethodPost, claimPath(id), token, nil); code != http.StatusUnauthorized {
				t.Fatalf("claim of a killed holder's slot: %d %q, want 401", code, body)
			}
			if code, _ := g.do(t, http.MethodPost, claimPath(id), token, nil); code != http.StatusUnauthorized {
				t.Fatalf("second claim: %d, want 401", code)
			}
			if _, err := os.Stat(filepath.Join(g.slots().Dir, id)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the dead holder's slot stays: %v", err)
			}
		})
	}
}

// After a restart, Sweep revokes and removes the slots of a dead holder, and leaves a live
// holder's.
func TestSlot_SweepRemovesDeadHoldersOnly(t *testing.T) {
	g := withSlots(t, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slotHolderEnv+"="+g.slots().Dir)
	cmd.Stdin = strings.NewReader("")
	stdout, _ := cmd.StdoutPipe()
	must(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	dead, _, _ := strings.Cut(line, " ")
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	live := newSlot(t, g)
	gone, err := g.slots().Sweep(context.Background())
	if err != nil || len(gone) != 1 || gone[0] != dead {
		t.Fatalf("Sweep = %v, %v; want [%s]", gone, err, dead)
	}
	if _, err := loadSlot(g.slots().Dir, live.ID); err != nil {
		t.Fatalf("a live holder's slot was swept: %v", err)
	}
}

// A slot whose binder gave up (ctx ended) is revoked: its worker's claim is refused.
func TestSlot_UnclaimedBindRevokes(t *testing.T) {
	g := withSlots(t, nil)
	s := g.exportBare(t, "01GIVEUP")
	sl := newSlot(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := sl.Bind(ctx, s.Dispatch, s.Token); err == nil {
		t.Fatal("Bind with nobody claiming returned no error")
	}
	if code, _ := g.do(t, http.MethodPost, claimPath(sl.ID), sl.Token, nil); code != http.StatusUnauthorized {
		t.Fatalf("claim after the binder gave up: %d, want 401", code)
	}
}

// Attack: a slot's token holder opens claim after claim on one slot; past MaxClaimWaiters
// the next is refused at once instead of polling the slot too.
func TestSlot_ClaimWaitersCapped(t *testing.T) {
	g := withSlots(t, func(s *Server) { s.ClaimWait = 5 * time.Second })
	sl := newSlot(t, g)
	var wg sync.WaitGroup
	for range MaxClaimWaiters {
		wg.Go(func() { g.do(t, http.MethodPost, claimPath(sl.ID), sl.Token, nil) })
	}
	agoratest.WaitFor(t, 10*time.Second, "the claim waiters", func() bool { return g.srv.waiters.count(sl.ID) == MaxClaimWaiters })
	if code, body := g.do(t, http.MethodPost, claimPath(sl.ID), sl.Token, nil); code != http.StatusTooManyRequests {
		t.Fatalf("claim over the cap: %d %q, want 429", code, body)
	}
	sl.Close() // the waiters see the slot gone
	wg.Wait()
}

// Attack: a binder that names one dispatch with another's token (or a made-up one) hands out
// nothing: the gateway checks the grant opens the named dispatch's standing session, and the
// slot is spent.
func TestSlot_GrantMustOpenItsSession(t *testing.T) {
	g := withSlots(t, nil)
	a, b := g.exportBare(t, "01GRANTA"), g.exportBare(t, "01GRANTB")
	for _, token := range []string{b.Token, TokenPrefix + "made-up"} {
		sl := newSlot(t, g)
		bound := bindAsync(context.Background(), sl, &remote.Session{Dispatch: a.Dispatch, Token: token})
		agoratest.WaitFor(t, 10*time.Second, "the slot's socket", func() bool {
			_, err := os.Lstat(filepath.Join(g.slots().Dir, sl.ID, slotSocket))
			return err == nil
		})
		code, body := g.do(t, http.MethodPost, claimPath(sl.ID), sl.Token, nil)
		if code != http.StatusBadGateway || strings.Contains(body, "agw_") {
			t.Fatalf("grant of %s with a token not its own: %d %q, want 502 and no token", a.Dispatch, code, body)
		}
		<-bound
		if code, _ := g.do(t, http.MethodPost, claimPath(sl.ID), sl.Token, nil); code != http.StatusUnauthorized {
			t.Fatalf("the slot after a refused grant: %d, want 401 (spent)", code)
		}
	}
}
