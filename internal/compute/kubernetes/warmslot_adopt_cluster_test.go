package kubernetes

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/netgw"
)

// slotClaimerEnv makes the test binary a supervisor that holds one warm slot and runs a
// dispatch in it, to be killed with -9 once the dispatch is bound (slotClaimerMain).
const slotClaimerEnv = "AGORA_K8S_TEST_SLOT_CLAIMER"

// slotClaimer is the killed supervisor's configuration.
type slotClaimer struct {
	Opts     claimerOpts
	Sessions string
	Slots    string
	Dispatch string
	PodEnd   string        // the slot pod's kwok end delay
	PodCode  int           // the slot pod's kwok exit code (an adopted Job's own outcome)
	Timeout  time.Duration // the dispatch's
}

// slotClaimerSpec is warmSpec in a process with no testing.T.
func slotClaimerSpec(id string, timeout time.Duration) (compute.Spec, error) {
	bundle, err := os.MkdirTemp("", "slotclaimer")
	if err != nil {
		return compute.Spec{}, err
	}
	out, err := os.MkdirTemp("", "slotclaimer")
	if err != nil {
		return compute.Spec{}, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "task.json"), []byte("{}"), 0o644); err != nil {
		return compute.Spec{}, err
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
		Limits: compute.Limits{Timeout: timeout, Memory: 1 << 30, Scratch: 256 << 20},
	}, nil
}

// slotClaimerMain starts a slot (its gateway slot its own, in Slots), says "<slot> <token>",
// runs the dispatch in it (the parent plays the slot pod's worker), says "bound" once the
// worker took the grant, and supervises until the parent's SIGKILL.
func slotClaimerMain() int {
	var c slotClaimer
	if err := json.Unmarshal([]byte(os.Getenv(slotClaimerEnv)), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o := c.Opts.options()
	o.Exporter = &netgw.Registry{Dir: c.Sessions}
	p, err := New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p.testOnlyPodMeta = failWith(c.PodCode, c.PodEnd)
	ctx := context.Background()
	gs, err := (&netgw.Slots{Dir: c.Slots}).Create(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmpl, err := slotClaimerSpec("TEMPLATE", c.Timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sl, err := p.StartSlot(ctx, tmpl, SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: warmPlaces})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start slot:", err)
		return 1
	}
	fmt.Printf("%s %s\n", gs.ID, gs.Token)
	s, err := slotClaimerSpec(c.Dispatch, c.Timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := sl.Run(ctx, s, gs.Bind); err != nil {
		fmt.Fprintln(os.Stderr, "run in the slot:", err)
		return 1
	}
	fmt.Println("bound")
	select {} // supervising, until the parent's SIGKILL
}

// killedSlotClaimer runs slotClaimerMain for dispatch id on p's target, plays its slot pod's
// worker, kills it with -9 once the dispatch is bound, and returns the slot's id.
func killedSlotClaimer(t *testing.T, p *Provider, g *slotGW, id, podEnd string, timeout time.Duration) string {
	t.Helper()
	return killedSlotClaimerCode(t, p, g, id, podEnd, 0, timeout)
}

// killedSlotClaimerCode is killedSlotClaimer with the slot pod ending with code (kwok's).
func killedSlotClaimerCode(t *testing.T, p *Provider, g *slotGW, id, podEnd string, code int, timeout time.Duration) string {
	t.Helper()
	cfg, err := json.Marshal(slotClaimer{Opts: claimerOptsOf(p), Sessions: g.reg.Dir, Slots: g.slots.Dir, Dispatch: id, PodEnd: podEnd, PodCode: code, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slotClaimerEnv+"="+string(cfg))
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("the slot claimer said nothing: %v", err)
	}
	slot, token, _ := strings.Cut(strings.TrimSpace(line), " ")
	got := workerClaims(t.Context(), g, slot, token)
	if d := <-got; d != id {
		t.Fatalf("the slot's worker was handed %q, want %q", d, id)
	}
	if line, err = r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "bound" {
		t.Fatalf("the slot claimer did not bind: %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	return slot
}

// refused asserts that AdoptSlot refused (an error saying why) and followed nothing.
func refused(t *testing.T, what string, h compute.Handle, err error, why string) {
	t.Helper()
	if h != nil || err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("AdoptSlot of %s = %v, %v; want refused (%q)", what, h, err, why)
	}
	if h != nil {
		go h.Wait()
	}
}

// A supervisor killed with -9 after its dispatch was bound to a warm slot: a fresh provider
// (the supervisor host) adopts the dispatch through its recorded task id, which names the
// slot's Job (no Job is named for the dispatch: Adopt finds nothing), takes back its gateway
// session and follows the slot's Job to its end (code 0, not lost), with the recorded task id.
// Before that, every attack is refused and nothing is followed: the dispatch adopted under
// another id, this home's slot never claimed, another home's slot claimed by this dispatch,
// the claim mark rewritten to another dispatch or to another pod, the deadline lifted, a Job
// of a slot's name that is no slot, a task id in another namespace or malformed; a task id
// naming the dispatch's own (cold) Job name or a slot Job that is gone is nil, nil.
func TestWarmSlot_AdoptAfterSupervisorKilled(t *testing.T) {
	t.Parallel() // waits a minute on kwok: see "Parallel tests" in cluster_test.go
	g := startSlotGW(t)
	p := slotProvider(t, g)
	testSlotAdoption(t, p, p, g)
}

// TestAgentSandboxBackend_WarmSlotAdopt is TestWarmSlot_AdoptAfterSupervisorKilled on a
// `backend: agent-sandbox` target, every provider action as agora's ServiceAccount under the
// documented Role: its slots are Jobs too, and an agent-sandbox provider adopts them.
func TestAgentSandboxBackend_WarmSlotAdopt(t *testing.T) {
	g := startSlotGW(t)
	p, admin := warmSandboxProviders(t, g)
	p.testOnlyPodMeta = failWith(0, "1h") // the slots this process starts wait for the test's end
	testSlotAdoption(t, p, admin, g)
}

func testSlotAdoption(t *testing.T, p, admin *Provider, g *slotGW) {
	const timeout = 3 * time.Minute
	id := clusterID("SLOTADOPT")
	// kwok ends the slot's pod with code 0 45-90 s after it runs: after the claim and the
	// attacks below, inside the dispatch's timeout.
	slot := killedSlotClaimer(t, p, g, id, "45s", timeout)
	name := objectName(slot)
	t.Cleanup(func() { dropJob(admin, name) })
	task := formatTaskID(p.ns, name)
	jobs := admin.client.BatchV1().Jobs(p.ns)
	job, err := jobs.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Annotations[annotationClaimed] != id || job.Annotations[annotationClaimedPod] == "" {
		t.Fatalf("the claimed slot's Job's annotations: %v", job.Annotations)
	}

	// The adopter: this process's provider, a supervisor host of the same home.
	s := warmSpec(t, id)
	s.Limits.Timeout = timeout
	a := SlotAdoption{TaskID: task, Home: testHome, Started: time.Now()}
	if h, err := p.Adopt(t.Context(), s); h != nil || err != nil {
		t.Fatalf("Adopt by the dispatch's name = %v, %v; want nil, nil (no Job is named for it)", h, err)
	}

	h, err := p.AdoptSlot(t.Context(), withID(s, clusterID("SLOTOTHER")), a)
	refused(t, "another dispatch's slot", h, err, "claimed by dispatch")
	ah := a
	ah.Home = "otherhome"
	h, err = p.AdoptSlot(t.Context(), s, ah)
	refused(t, "this slot as another home", h, err, "another home's")

	// This home's slot never claimed.
	idle, _ := startSlot(t, p, g)
	ai := a
	ai.TaskID = formatTaskID(p.ns, idle.name)
	h, err = p.AdoptSlot(t.Context(), s, ai)
	refused(t, "a slot never claimed", h, err, "never claimed")
	// Another home's slot, marked claimed by this dispatch (by whoever may patch Jobs).
	other := otherHomeSlot(t, p)
	opod, err := other.findPod(t.Context())
	if err != nil || opod == nil {
		t.Fatalf("the other home's slot pod: %v", err)
	}
	annotate(t, jobs, other.name, map[string]string{annotationClaimed: id, annotationClaimedPod: string(opod.UID)})
	ao := a
	ao.TaskID = formatTaskID(p.ns, other.name)
	h, err = p.AdoptSlot(t.Context(), s, ao)
	refused(t, "another home's slot claimed by this dispatch", h, err, "another home's")

	// The claim mark edited after the claim: to another dispatch, to no pod, to another pod.
	annotate(t, jobs, name, map[string]string{annotationClaimed: clusterID("SLOTTHIEF")})
	h, err = p.AdoptSlot(t.Context(), s, a)
	refused(t, "a slot whose claim was rewritten to another dispatch", h, err, "claimed by dispatch")
	annotate(t, jobs, name, map[string]string{annotationClaimed: ""})
	h, err = p.AdoptSlot(t.Context(), s, a)
	refused(t, "a slot whose claim was erased", h, err, "never claimed")
	pod := job.Annotations[annotationClaimedPod]
	annotate(t, jobs, name, map[string]string{annotationClaimed: id, annotationClaimedPod: "00000000-0000-0000-0000-000000000000"})
	h, err = p.AdoptSlot(t.Context(), s, a)
	refused(t, "a slot whose claimed pod was rewritten", h, err, "not the pod its claim checked")
	annotate(t, jobs, name, map[string]string{annotationClaimedPod: pod})

	// The deadline lifted past the dispatch's timeout.
	ads := *job.Spec.ActiveDeadlineSeconds
	setDeadline(t, jobs, name, ads+3600)
	h, err = p.AdoptSlot(t.Context(), s, a)
	refused(t, "a slot whose deadline was lifted", h, err, "past the dispatch's timeout")
	setDeadline(t, jobs, name, ads)

	// A Job of a slot's name, claimed by this dispatch, that is no slot.
	fake := objectName("s" + strings.Repeat("0f", 16))
	fj := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fake, Labels: map[string]string{labelManagedBy: managedBy, labelDispatch: id, labelHome: testHome},
			Annotations: map[string]string{annotationClaimed: id, annotationClaimedPod: pod}},
		Spec: batchv1.JobSpec{Suspend: ptrTo(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "x", Image: "example.invalid/x"}}}}},
	}
	if _, err := jobs.Create(t.Context(), fj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropJob(admin, fake) })
	af := a
	af.TaskID = formatTaskID(p.ns, fake)
	h, err = p.AdoptSlot(t.Context(), s, af)
	refused(t, "a Job of a slot's name that is no slot", h, err, "not agora's warm slot")
	for what, tid := range map[string]string{
		"a task id in another namespace": formatTaskID("elsewhere", name),
		"a malformed task id":            "k8s:" + name,
	} {
		aw := a
		aw.TaskID = tid
		h, err = p.AdoptSlot(t.Context(), s, aw)
		refused(t, what, h, err, "")
	}
	for what, tid := range map[string]string{
		"the dispatch's own Job name":  formatTaskID(p.ns, objectName(id)),
		"a slot Job that is gone":      formatTaskID(p.ns, objectName("s"+strings.Repeat("e", 32))),
		"a cold dispatch's Job's name": formatTaskID(p.ns, objectName(clusterID("COLD"))),
	} {
		aw := a
		aw.TaskID = tid
		if h, err := p.AdoptSlot(t.Context(), s, aw); h != nil || err != nil {
			t.Errorf("AdoptSlot of %s = %v, %v; want nil, nil", what, h, err)
		}
	}

	// The dispatch's own claim: adopted, followed to its pod's end.
	h, err = p.AdoptSlot(t.Context(), s, a)
	if err != nil || h == nil {
		t.Fatalf("AdoptSlot = %v, %v; want the slot's Job followed", h, err)
	}
	if h.TaskID() != task {
		t.Errorf("adopted task id %q, want the recorded %q", h.TaskID(), task)
	}
	exit := waitTimeout(t, h, 4*time.Minute)
	if exit.Code != 0 || exit.Lost || exit.Cancelled || exit.TimedOut {
		t.Errorf("adopted exit = %+v, want the pod's end, code 0", exit)
	}
}

// annotate merges annotations into Job name ("" removes one), as anyone who may patch Jobs can.
func annotate(t *testing.T, jobs interface {
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*batchv1.Job, error)
}, name string, annotations map[string]string) {
	t.Helper()
	m := map[string]any{}
	for k, v := range annotations {
		if v == "" {
			m[k] = nil
		} else {
			m[k] = v
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": m}})
	if _, err := jobs.Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setDeadline sets Job name's activeDeadlineSeconds.
func setDeadline(t *testing.T, jobs interface {
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*batchv1.Job, error)
}, name string, secs int64) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"activeDeadlineSeconds":%d}}`, secs)
	if _, err := jobs.Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// dropJob deletes Job name and its pod, whatever its uid.
func dropJob(admin *Provider, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	admin.client.BatchV1().Jobs(admin.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)})
}
