package kubernetes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/netgw"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// These tests run the warm slots on the shared control plane with kwok, against a real
// network gateway with its slot store: the test plays each slot pod's worker (kwok runs no
// process), claiming with the token it reads from the slot's Secret, as the pod's
// secretKeyRef does.

// slotGW is a real network gateway serving sessions and slots on loopback.
type slotGW struct {
	srv   *netgw.Server
	reg   *netgw.Registry
	slots *netgw.Slots
	url   string
	ca    []byte
	// pods is a pool gateway's verifier (startPoolGW): a test may set another.
	pods *lateVerifier
}

func startSlotGW(t testing.TB) *slotGW {
	t.Helper()
	home := t.TempDir()
	certs, err := netgw.LoadOrCreateCA(filepath.Join(home, "keys"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	g := &slotGW{reg: &netgw.Registry{Dir: filepath.Join(home, "gateway", "sessions")},
		slots: &netgw.Slots{Dir: filepath.Join(home, "gateway", "slots")}, ca: certs.CAPEM}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.url = "https://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.srv = &netgw.Server{Registry: g.reg, Slots: g.slots, Version: workerremote.Version()}
	go func() {
		defer close(done)
		g.srv.Serve(ctx, ln, certs.Server)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return g
}

// slotProvider is a cluster provider exporting to g, its pods kept running by kwok for an hour.
func slotProvider(t testing.TB, g *slotGW) *Provider {
	t.Helper()
	p, _ := clusterProvider(t, &fakeExporter{})
	p.opts.Exporter = g.reg
	p.testOnlyPodMeta = failWith(0, "1h")
	return p
}

// warmSpec is a dispatch's spec whose binds the real gateway exports, all below /agora.
func warmSpec(t testing.TB, id string) compute.Spec {
	bundle, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "task.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return compute.Spec{
		ID:   id,
		Argv: []string{"/agora/bin/agora-worker", "worker"},
		Env:  []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "AGORA_DISPATCH_ID=" + id},
		Dir:  "/agora/workspace",
		Binds: []compute.Bind{
			{Src: "/usr/local/bin/agora", Dst: "/agora/bin/agora-worker"},
			{Src: bundle, Dst: "/agora/bundle"},
			{Src: out, Dst: "/agora/out", Writable: true, Result: true},
		},
		Limits: compute.Limits{Timeout: 90 * time.Second, Memory: 1 << 30, Scratch: 256 << 20},
	}
}

// warmPlaces are warmSpec's read-only places (its bundle), as the dispatch package derives
// them from a template (SlotOptions.Places).
var warmPlaces = []remote.SlotPlace{{Dst: "/agora/bundle"}}

// testHome is the tests' holder identity (SlotOptions.Home).
const testHome = "k8swarmtesthome"

// startSlot makes a gateway slot and its pod.
func startSlot(t testing.TB, p *Provider, g *slotGW) (*Slot, *netgw.Slot) {
	t.Helper()
	gs, err := g.slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close() })
	sl, err := p.StartSlot(t.Context(), warmSpec(t, "TEMPLATE"), SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Discard)
	return sl, gs
}

// podToken reads the slot's token as its pod gets it: from its Secret.
func podToken(t testing.TB, p *Provider, sl *Slot) string {
	t.Helper()
	sec, err := p.client.CoreV1().Secrets(p.ns).Get(context.Background(), sl.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(sec.Data[secretToken])
}

// workerClaims plays the slot pod's worker: it claims with the slot's token and reports the
// dispatch it was handed ("" and the error when refused).
func workerClaims(ctx context.Context, g *slotGW, id, token string) <-chan string {
	got := make(chan string, 1)
	go func() {
		c, err := workerremote.Claim(ctx, g.url, id, token, g.ca, nil)
		if err != nil {
			got <- "refused: " + err.Error()
			return
		}
		got <- c.Dispatch()
		c.Close()
	}()
	return got
}

// A dispatch runs in a warm slot: the slot's objects hold no token but its Secret, its init
// container none at all; the worker claiming with the slot's token gets exactly the dispatch;
// the Job is marked claimed with the dispatch's deadline; the slot's token replayed after the
// claim opens nothing; cancelling ends the Job and its Secret.
func TestWarmSlot_ClusterClaimRunsDispatch(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	sl, gs := startSlot(t, p, g)
	token := podToken(t, p, sl)
	if token != gs.Token {
		t.Fatal("the slot's Secret does not hold the slot's token")
	}
	job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := sl.findPod(t.Context())
	if err != nil || pod == nil {
		t.Fatalf("slot pod: %v", err)
	}
	for what, obj := range map[string]any{"job": job, "pod": pod} {
		if b, _ := json.Marshal(obj); strings.Contains(string(b), token) {
			t.Errorf("the slot's %s holds its token", what)
		}
	}
	if job.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("an unclaimed slot has a deadline: %d", *job.Spec.ActiveDeadlineSeconds)
	}
	for _, e := range job.Spec.Template.Spec.InitContainers[0].Env {
		if e.Name == remote.TokenEnv || e.Name == remote.DispatchEnv {
			t.Errorf("the slot's init container gets %s", e.Name)
		}
	}

	id := clusterID("WARM")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := workerClaims(ctx, g, gs.ID, token)
	h, err := sl.Run(ctx, warmSpec(t, id), gs.Bind)
	if err != nil {
		t.Fatalf("Run in the slot: %v", err)
	}
	if d := <-got; d != id {
		t.Fatalf("the slot's worker was handed %q, want %q", d, id)
	}
	if h.TaskID() != formatTaskID(p.ns, sl.name) {
		t.Errorf("task id %q", h.TaskID())
	}
	job, err = p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Annotations[annotationClaimed] != id || job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds < 90 {
		t.Errorf("claimed job: annotations %v, deadline %v", job.Annotations, job.Spec.ActiveDeadlineSeconds)
	}
	// The attack: the slot's token, replayed after its claim (a copy of the pod's Secret).
	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	if d := <-workerClaims(rctx, g, gs.ID, token); !strings.HasPrefix(d, "refused: ") || !strings.Contains(d, "401") {
		t.Errorf("the slot's token replayed after its claim: %q, want refused with 401", d)
	}
	// A second Run of the same slot is refused before it touches anything.
	if _, err := sl.Run(ctx, warmSpec(t, clusterID("AGAIN")), gs.Bind); !errors.Is(err, ErrSlotChanged) {
		t.Errorf("second Run of a slot = %v, want ErrSlotChanged", err)
	}
	cancel()
	exit := waitTimeout(t, h, 3*time.Minute)
	if !exit.Cancelled || exit.Isolation != "kubernetes+restricted+readonly+nonroot+netpol" {
		t.Errorf("exit = %+v", exit)
	}
	if _, err := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the slot's Secret outlived its dispatch: %v", err)
	}
}

// A slot whose pod was relabelled out of its NetworkPolicy, given another image, or deleted,
// whose NetworkPolicy was widened or deleted, or whose Job was replaced, is never claimed: Run
// refuses before any bind, and deletes it.
func TestWarmSlot_ClusterChangedSlotNeverClaimed(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	changes := map[string]func(t *testing.T, sl *Slot){
		"relabelled": func(t *testing.T, sl *Slot) {
			pod, _ := sl.findPod(t.Context())
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, labelDispatch)
			if _, err := p.client.CoreV1().Pods(p.ns).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		"image": func(t *testing.T, sl *Slot) {
			pod, _ := sl.findPod(t.Context())
			patch := []byte(`{"spec":{"containers":[{"name":"worker","image":"registry.example/evil@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}}`)
			if _, err := p.client.CoreV1().Pods(p.ns).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		"pod deleted": func(t *testing.T, sl *Slot) {
			pod, _ := sl.findPod(t.Context())
			if err := p.client.CoreV1().Pods(p.ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
				t.Fatal(err)
			}
		},
		"policy widened": func(t *testing.T, sl *Slot) {
			patch := []byte(`{"spec":{"egress":[{}]}}`) // egress anywhere
			if _, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Patch(t.Context(), sl.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		"policy deleted": func(t *testing.T, sl *Slot) {
			// Its Secret and (once owned) Job go with it: the slot is gone either way.
			if err := p.client.NetworkingV1().NetworkPolicies(p.ns).Delete(t.Context(), sl.name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationOrphan)}); err != nil {
				t.Fatal(err)
			}
		},
		"job replaced": func(t *testing.T, sl *Slot) {
			sl.p.deleteJob(sl.name, sl.job)
			for {
				_, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			job := p.slotJobObject(jobInput{name: sl.name, id: sl.ID, spec: sl.spec, gateway: p.gateway}, sl.places)
			if _, err := p.client.BatchV1().Jobs(p.ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sl, _ := startSlot(t, p, g)
			change(t, sl)
			bound := false
			_, err := sl.Run(t.Context(), warmSpec(t, clusterID("CHANGED")), func(ctx context.Context, dispatch, token string) error {
				bound = true // no worker claims here: a bind would wait for ever
				return errors.New("bound")
			})
			if !errors.Is(err, ErrSlotChanged) || bound {
				t.Fatalf("Run in a changed slot = %v (bound %v), want ErrSlotChanged before any bind", err, bound)
			}
		})
	}
}

// Fifty dispatches claim at once from a pool of slots: each slot runs one dispatch at most,
// each slot's worker is handed exactly one dispatch, and every dispatch is either in a slot of
// its own or told to start cold.
func TestWarmSlot_ClusterConcurrentClaimsNeverShare(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	const slots, claims = 4, 50
	var all []*Slot
	gws := map[string]*netgw.Slot{}
	for range slots {
		sl, gs := startSlot(t, p, g)
		all = append(all, sl)
		gws[sl.ID] = gs
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	handed := map[string]<-chan string{}
	for _, sl := range all {
		handed[sl.ID] = workerClaims(ctx, g, sl.ID, podToken(t, p, sl))
	}
	var (
		mu   sync.Mutex
		ran  = map[string][]string{} // slot -> dispatches that ran in it
		hs   []compute.Handle
		wg   sync.WaitGroup
		cold int
	)
	for i := range claims {
		wg.Go(func() {
			sl := all[i%slots] // every slot is raced for by a dozen dispatches
			id := fmt.Sprintf("CONC%d%02d", time.Now().UnixNano()%1e6, i)
			h, err := sl.Run(ctx, warmSpec(t, id), gws[sl.ID].Bind)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				cold++
				return
			}
			ran[sl.ID] = append(ran[sl.ID], id)
			hs = append(hs, h)
		})
	}
	wg.Wait()
	for _, sl := range all {
		if len(ran[sl.ID]) != 1 {
			t.Errorf("slot %s ran %v, want exactly one dispatch", sl.ID, ran[sl.ID])
			continue
		}
		if d := <-handed[sl.ID]; d != ran[sl.ID][0] {
			t.Errorf("slot %s's worker was handed %q, its Run was for %q", sl.ID, d, ran[sl.ID][0])
		}
	}
	if cold != claims-slots {
		t.Errorf("%d dispatches told to start cold, want %d", cold, claims-slots)
	}
	cancel()
	for _, h := range hs {
		waitTimeout(t, h, 3*time.Minute)
	}
}

// slotHolderEnv makes the test binary a warm slot's holder, to be killed with -9: it makes a
// gateway slot in the directory the variable names, says its id and token, and waits.
const slotHolderEnv = "AGORA_K8S_TEST_SLOT_HOLDER"

func slotHolderMain() int {
	sl, err := (&netgw.Slots{Dir: os.Getenv(slotHolderEnv)}).Create(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s %s\n", sl.ID, sl.Token)
	select {}
}

// The holder is killed with -9 with one slot claimed and one waiting: neither slot's token
// opens anything afterwards, the gateway's sweep revokes the waiting one, and the pod sweep
// deletes its Job while leaving the claimed slot's Job, which runs its dispatch.
func TestWarmSlot_ClusterHolderKilled9NeverReused(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	claimed, claimedGW := startSlot(t, p, g)
	claimedToken := podToken(t, p, claimed)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := workerClaims(ctx, g, claimed.ID, claimedToken)
	h, err := claimed.Run(ctx, warmSpec(t, clusterID("HELD")), claimedGW.Bind)
	if err != nil {
		t.Fatal(err)
	}
	<-got

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slotHolderEnv+"="+g.slots.Dir)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	id, token, _ := strings.Cut(strings.TrimSpace(line), " ")
	waiting, err := p.StartSlot(t.Context(), warmSpec(t, "TEMPLATE"), SlotOptions{ID: id, Token: token, Home: testHome, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(waiting.Discard)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	for slot, tok := range map[string]string{claimed.ID: claimedToken, id: token} {
		if d := <-workerClaims(rctx, g, slot, tok); !strings.HasPrefix(d, "refused: ") {
			t.Errorf("slot %s's token after its holder's kill -9 was handed %q", slot, d)
		}
	}
	// Another home's slot in the same namespace, whose gateway slot this home has never had:
	// this home's sweep must leave it (its own holder lives elsewhere).
	other := otherHomeSlot(t, p)
	gone, err := g.slots.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	live := func(s string) bool {
		_, err := os.Lstat(filepath.Join(g.slots.Dir, s))
		return err == nil
	}
	swept, err := p.SweepSlots(t.Context(), testHome, live)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(swept, id) || slices.Contains(swept, claimed.ID) {
		t.Errorf("pod sweep deleted %v (gateway swept %v): want the dead holder's waiting slot %s, never the claimed %s", swept, gone, id, claimed.ID)
	}
	if job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), claimed.name, metav1.GetOptions{}); err != nil || job.DeletionTimestamp != nil {
		t.Errorf("the claimed slot's job was swept: %v", err)
	}
	if slices.Contains(swept, other.ID) || other.Check(t.Context()) != nil {
		t.Errorf("this home's sweep deleted another home's slot %s: swept %v, check %v", other.ID, swept, other.Check(t.Context()))
	}
	cancel()
	waitTimeout(t, h, 3*time.Minute)
}

// otherHomeSlot starts, through p, a slot of another home ("otherhome") whose gateway slot is
// a gateway of its own: a slot in the same namespace this home never held.
func otherHomeSlot(t *testing.T, p *Provider) *Slot {
	t.Helper()
	ogs, err := startSlotGW(t).slots.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ogs.Close() })
	other, err := p.StartSlot(t.Context(), warmSpec(t, "TEMPLATE"), SlotOptions{ID: ogs.ID, Token: ogs.Token, Home: "otherhome", Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Discard)
	return other
}
