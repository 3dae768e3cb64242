package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// Warm slots on Kubernetes. agora holds each slot itself, as a Job of the Job backend:
// an agent-sandbox SandboxWarmPool's pods share one template (environment, Secret
// references), so a per-slot token revoked at the claim could not reach each pod, and a
// claim could not give a pod the dispatch's policy or uid (note31). A slot is, all named
// agora-<slot> and labelled agora.slot=<slot>:
//
//   - a NetworkPolicy admitting egress to the gateway alone and no ingress, made first;
//   - a Secret holding the slot's token (never a dispatch's), the gateway's CA and the
//     template's environment;
//   - a Job whose init container only copies agora's worker binary (it holds no token) and
//     whose worker container runs in claim mode ([remote.SlotEnv]): it waits on the gateway
//     until the holder binds a dispatch to the slot, fetches that dispatch's mounts below
//     /agora (an emptyDir) and runs it as a cold pod's worker does.
//
// The gateway revokes the slot's token at the claim, so a slot runs one dispatch, ever. At the
// claim the holder checks that the Job and its pod are still the ones it made (uid, labels,
// containers: a pod relabelled out of its policy or given another image is never claimed),
// then marks the Job claimed, binds, then sets the Job's activeDeadlineSeconds to the
// dispatch's timeout. A claimed slot's Job is followed as a cold dispatch's Job is.

// Slot labels and annotations.
const (
	labelSlot = "agora.slot"
	// labelHome names the home whose holder made the slot: a namespace several agora homes
	// share keeps each home's sweep to its own slots.
	labelHome = "agora.home"
	// annotationClaimed, on a slot's Job, names the dispatch it runs: a sweep leaves it.
	annotationClaimed = "agora.dev/claimed"
	// annotationClaimedPod, set with annotationClaimed, is the uid of the pod the claim
	// checked, the one whose worker took the dispatch's grant: an adopter
	// ([Provider.AdoptSlot]) follows that pod's Job only while it is that pod.
	annotationClaimedPod = "agora.dev/claimed-pod"
	// slotRootVolume is the slot pod's writable /agora, where the worker fetches its
	// dispatch's mounts at the claim.
	slotRootVolume = "root"
	// slotRoot is the layout root the slot's worker fetches below.
	slotRoot = "/agora"
)

// proxyTokenEnv is the worker's egress proxy password variable (wire.ProxyTokenEnv, which
// this host-side package does not import; a test pins the two equal).
const proxyTokenEnv = "AGORA_PROXY_TOKEN"

// slotReadyWait bounds how long StartSlot waits for the slot's pod to run.
var slotReadyWait = 5 * time.Minute

// SlotOptions are one slot's gateway identity, from the gateway's slot store.
type SlotOptions struct {
	// ID is the gateway slot's id ("s" and 32 hex digits); it names the slot's objects.
	ID string
	// Token is the slot's bearer token: it goes into the slot's Secret only.
	Token string
	// Home identifies the holder's home, the same for every replica of it (dispatch.k8sHome:
	// its audit key): an opaque label value of [a-z0-9], 1 to 63 bytes. [Provider.SweepSlots]
	// of another home never touches this slot.
	Home string
	// Places are the template's read-only places (warmslot_places.go): the pod mounts each
	// read-only, filled at the claim by its filler. A dispatch whose read-only mounts are not
	// exactly these is refused before the bind. Below /agora, or a file (the system trust
	// store of a proxy dispatch).
	Places []remote.SlotPlace
}

// validHome reports whether h is a label value of [a-z0-9], 1 to 63 bytes.
func validHome(h string) bool {
	if h == "" || len(h) > maxName {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// Slot is one warm pod agora holds. Safe for concurrent use.
type Slot struct {
	p    *Provider
	ID   string
	name string
	spec compute.Spec // the template the slot was started from (its ID is the slot's)
	// places are its read-only places (SlotOptions.Places), in the order of their volumes.
	places []remote.SlotPlace
	job    types.UID
	np     types.UID
	sec    types.UID
	pod    string // a hash of the containers the Job was stored with
	npSum  string // a hash of the NetworkPolicy's spec as stored
	start  time.Time

	mu        sync.Mutex
	spent     bool               // guarded by mu: claimed or discarded
	stopWatch context.CancelFunc // guarded by mu: ends watchPod (slotwatch.go)

	gone     chan struct{} // closed when the watch saw the pod stop waiting (slotwatch.go)
	goneOnce sync.Once
}

// SlotShape is the key a dispatch's spec must match to run in a slot started from a spec
// with the same key: its argv, its environment without the per-dispatch id, its limits, its
// sandbox and where its binds are (by place and writability alone: their sources are the
// dispatch's, fetched or filled at the claim), so a dispatch with the egress proxy's trust
// store and one without never take each other's slots. RunAs is not part of it: the slot's pod
// runs as the uid it was started with ([Slot.Run] wants the dispatch's RunAs to be that one).
func SlotShape(s compute.Spec) string {
	env := slotEnv(s.Env)
	slices.Sort(env)
	var binds []string
	for _, b := range s.Binds {
		if len(s.Argv) == 0 || b.Dst != s.Argv[0] {
			binds = append(binds, fmt.Sprintf("%s rw=%v result=%v", b.Dst, b.Writable, b.Result))
		}
	}
	slices.Sort(binds)
	b, _ := json.Marshal(struct {
		Argv    []string
		Env     []string
		Limits  compute.Limits
		Sandbox string
		Binds   []string
	}{s.Argv, env, s.Limits, string(s.Sandbox), binds})
	sum := sha256.Sum256(b)
	return "k8s:" + hex.EncodeToString(sum[:16])
}

// slotEnv is env without the per-dispatch variable.
func slotEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, remote.DispatchEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// StartSlot starts one warm slot from spec (a learnt template: its ID and binds are ignored)
// and returns once its pod runs. The pod runs as spec.RunAs when set (a root agora's uid
// lease, which the claiming dispatch takes over, as a cold pod runs as its leased uid), else
// as the slot id's own uid of the target's range (as a cold pod runs as its dispatch id's).
// On error nothing of it is left.
func (p *Provider) StartSlot(ctx context.Context, spec compute.Spec, o SlotOptions) (*Slot, error) {
	if !remote.ValidSlotID(o.ID) {
		return nil, fmt.Errorf("warm slot %q: not a slot id", o.ID)
	}
	if o.Token == "" {
		return nil, fmt.Errorf("warm slot %s: no token", o.ID)
	}
	if !validHome(o.Home) {
		return nil, fmt.Errorf("warm slot %s: home %q: want [a-z0-9], 1 to %d bytes", o.ID, o.Home, maxName)
	}
	for _, kv := range spec.Env {
		if strings.HasPrefix(kv, proxyTokenEnv+"=") {
			// A slot's Secret is made before any dispatch: a template's proxy password would
			// be one dispatch's credential handed to whichever dispatch claims the slot.
			return nil, fmt.Errorf("warm slot %s: the template holds the egress proxy's password (%s); such dispatches start cold", o.ID, proxyTokenEnv)
		}
	}
	// The slot is a Job on either backend: its lifecycle is agora's, not a Sandbox
	// controller's, and a Job's pod template is immutable once made.
	if err := checkPlaces(o.Places, spec.Argv); err != nil {
		return nil, fmt.Errorf("warm slot %s: %w", o.ID, err)
	}
	tmpl := compute.Spec{ID: o.ID, Argv: spec.Argv, Env: slotEnv(spec.Env), Limits: spec.Limits, Sandbox: spec.Sandbox, Dir: "/tmp",
		Binds: slices.Clone(spec.Binds)}
	if spec.RunAs != nil {
		ra := *spec.RunAs
		tmpl.RunAs = &ra
	}
	env, err := p.checkSpec(tmpl)
	if err != nil {
		return nil, fmt.Errorf("warm slot %s: %w", o.ID, err)
	}
	gw, err := p.resolveGateway(ctx)
	if err != nil {
		return nil, fmt.Errorf("warm slot %s: %w", o.ID, err)
	}
	sl := &Slot{p: p, ID: o.ID, name: objectName(o.ID), spec: tmpl, places: slices.Clone(o.Places), gone: make(chan struct{})}
	if err := sl.createParts(ctx, o, env, gw); err != nil {
		return nil, err
	}
	job := p.slotJobObject(jobInput{name: sl.name, id: o.ID, spec: tmpl, env: env, gateway: gw}, sl.places)
	job.Labels[labelHome] = o.Home
	mjob, err := p.client.BatchV1().Jobs(p.ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("warm slot %s: create job: %w", o.ID, err), p.deleteParts(sl.name, sl.np, sl.sec))
	}
	sl.job, sl.pod, sl.start = mjob.UID, containersHash(mjob.Spec.Template.Spec), time.Now()
	if err := p.ownParts(ctx, jobOwner(mjob), sl.np, sl.sec); err != nil {
		sl.Discard()
		return nil, fmt.Errorf("warm slot %s: make its job own its parts: %w", o.ID, err)
	}
	if err := sl.waitRunning(ctx); err != nil {
		sl.Discard()
		return nil, fmt.Errorf("warm slot %s: %w", o.ID, err)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	sl.mu.Lock()
	sl.stopWatch = stop
	sl.mu.Unlock()
	go sl.watchPod(wctx)
	return sl, nil
}

// createParts makes the slot's NetworkPolicy, then its Secret (owned by the policy until the
// Job owns both). Both carry the slot's and the home's labels: a holder killed before its Job
// owned them leaves parts no Job sweep reaches, which [Provider.SweepSlots] finds by them.
func (sl *Slot) createParts(ctx context.Context, o SlotOptions, env []envVar, gw gatewayAddr) error {
	p := sl.p
	np := networkPolicyObject(p.ns, sl.name, o.ID, gw)
	np.Labels[labelSlot], np.Labels[labelHome] = o.ID, o.Home
	made, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Create(ctx, np, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("warm slot %s: create network policy: %w", o.ID, err)
	}
	sl.np, sl.npSum = made.UID, specHash(made.Spec)
	sec := secretObject(p.ns, sl.name, o.ID, o.Token, p.opts.GatewayCA, env)
	sec.Labels[labelSlot], sec.Labels[labelHome] = o.ID, o.Home
	sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Name: sl.name, UID: sl.np}}
	msec, err := p.client.CoreV1().Secrets(p.ns).Create(ctx, sec, metav1.CreateOptions{})
	if err != nil {
		return errors.Join(fmt.Errorf("warm slot %s: create secret: %w", o.ID, err), p.deleteParts(sl.name, sl.np, ""))
	}
	sl.sec = msec.UID
	return nil
}

// slotJobObject is a cold Job's object turned into a slot's: the init container only copies
// the worker binary and makes the places' entries (no token, no dispatch), the worker
// container claims (the slot's id in its environment, the slot's token from the Secret) and
// has a writable /agora to fetch into, with a read-only mount at each place, which the filler
// fills at the claim (warmslot_places.go).
func (p *Provider) slotJobObject(in jobInput, places []remote.SlotPlace) *batchv1.Job {
	job := p.jobObject(in)
	// No deadline until the claim: it is the dispatch's timeout, counted from the claim.
	job.Spec.ActiveDeadlineSeconds = nil
	job.Labels[labelSlot] = in.id
	job.Spec.Template.Labels[labelSlot] = in.id
	pod := &job.Spec.Template.Spec
	scratch := in.spec.Limits.Scratch
	if scratch <= 0 {
		scratch = defaultScratch
	}
	pod.Volumes = append(pod.Volumes, emptyDir(slotRootVolume, scratch, ""))
	slotID := corev1.EnvVar{Name: remote.SlotEnv, Value: in.id}
	fetch := &pod.InitContainers[0]
	fetch.Env = []corev1.EnvVar{{Name: remote.StageEnv, Value: stageDir}, slotID}
	w := &pod.Containers[0]
	w.Env = append(w.Env, slotID)
	// /agora is the slot's own, writable; the binary stays read-only at /agora/bin.
	w.VolumeMounts = append([]corev1.VolumeMount{{Name: slotRootVolume, MountPath: slotRoot}}, w.VolumeMounts...)
	p.addSlotPlaces(pod, places, scratch, in.name)
	return job
}

// containersHash is what a slot's pod must still run: its containers' images, commands,
// arguments, environment, mounts, security and resources (an in-place resize of a waiting pod
// would run the dispatch past its limits), what its volumes are (a volume of the same name
// made a claim on someone's storage keeps every mount as it was), the namespaces it shares
// with its node or between its containers, and the pod's own security context and runtime
// class, and its image pull policy and pull secrets (which registry credential fetched the
// image, and whether a cached one was trusted). A pod with an ephemeral container is refused
// by [Slot.Check] before this is compared.
func containersHash(s corev1.PodSpec) string {
	type c struct {
		Image   string
		Command []string
		Args    []string
		Env     []corev1.EnvVar
		Mounts  []corev1.VolumeMount
		Sec     *corev1.SecurityContext
		Res     corev1.ResourceRequirements
		Pull    corev1.PullPolicy
	}
	var cs []c
	for _, x := range append(slices.Clone(s.InitContainers), s.Containers...) {
		cs = append(cs, c{x.Image, x.Command, x.Args, x.Env, x.VolumeMounts, x.SecurityContext, x.Resources, x.ImagePullPolicy})
	}
	b, _ := json.Marshal(struct {
		C       []c
		Sec     *corev1.PodSecurityContext
		RC      *string
		SA      *bool
		Volumes []corev1.Volume
		Host    [3]bool
		Share   *bool
		Users   *bool
		Res     *corev1.ResourceRequirements
		Pull    []corev1.LocalObjectReference
	}{cs, s.SecurityContext, s.RuntimeClassName, s.AutomountServiceAccountToken, s.Volumes,
		[3]bool{s.HostNetwork, s.HostPID, s.HostIPC}, s.ShareProcessNamespace, s.HostUsers, s.Resources, s.ImagePullSecrets})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// specHash is a hash of v's JSON (a NetworkPolicy's spec).
func specHash(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// waitRunning waits until the slot's pod runs (its worker then waits on the gateway).
func (sl *Slot) waitRunning(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, slotReadyWait)
	defer cancel()
	for {
		pod, err := sl.findPod(ctx)
		if err != nil {
			return err
		}
		if pod != nil {
			switch pod.Status.Phase {
			case corev1.PodRunning:
				return nil
			case corev1.PodFailed, corev1.PodSucceeded:
				return fmt.Errorf("its pod %s ended before any claim (%s)", pod.Name, pod.Status.Phase)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("its pod did not run in %v: %w", slotReadyWait, context.Cause(ctx))
		case <-time.After(claimPoll):
		}
	}
}

// findPod returns the slot's pod of its Job, nil while there is none. More than one is an
// error: the Job runs one pod (backoffLimit 0).
func (sl *Slot) findPod(ctx context.Context) (*corev1.Pod, error) {
	l, err := sl.p.client.CoreV1().Pods(sl.p.ns).List(ctx, metav1.ListOptions{LabelSelector: labelSlot + "=" + sl.ID})
	if err != nil {
		return nil, fmt.Errorf("list the slot's pods: %w", err)
	}
	var found *corev1.Pod
	for i := range l.Items {
		pod := &l.Items[i]
		if !ownedByUID(pod.OwnerReferences, sl.job) {
			return nil, fmt.Errorf("pod %s carries the slot's label and is not its job's", pod.Name)
		}
		if found != nil {
			return nil, fmt.Errorf("the slot's job has more than one pod")
		}
		found = pod
	}
	return found, nil
}

// Alive reports whether the slot may still be claimed as far as this process knows: not
// spent, and its pod still waiting as the watch sees it (slotwatch.go). The claim checks the
// cluster again ([Slot.Check]).
func (sl *Slot) Alive() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return !sl.spent && !sl.isGone()
}

// spend marks the slot claimed or discarded and ends its pod's watch; it says whether it
// was spent before.
func (sl *Slot) spend() bool {
	sl.mu.Lock()
	spent, stop := sl.spent, sl.stopWatch
	sl.spent, sl.stopWatch = true, nil
	sl.mu.Unlock()
	if stop != nil {
		stop()
	}
	return spent
}

// ErrSlotChanged: the slot's Job or pod is gone or not as agora made it; it is never claimed.
var ErrSlotChanged = errors.New("warm slot changed or gone")

// Check makes sure the slot's NetworkPolicy, Job and pod are the ones agora made and still
// wait: the same uids, the policy's spec unchanged (a policy deleted or widened while the slot
// waited would leave the claimed dispatch unconfined), every label the policy selects on the
// pod, the same containers, running, not being deleted, not claimed. Anything else is
// [ErrSlotChanged].
func (sl *Slot) Check(ctx context.Context) error {
	_, err := sl.check(ctx)
	return err
}

// check is Check returning the slot's pod it checked.
func (sl *Slot) check(ctx context.Context) (*corev1.Pod, error) {
	np, err := sl.p.findPolicy(ctx, sl.name)
	switch {
	case err != nil:
		return nil, fmt.Errorf("warm slot %s: %w", sl.ID, err)
	case np == nil || np.UID != sl.np || np.DeletionTimestamp != nil:
		return nil, fmt.Errorf("%w: its network policy is gone or replaced", ErrSlotChanged)
	case specHash(np.Spec) != sl.npSum:
		return nil, fmt.Errorf("%w: its network policy was changed", ErrSlotChanged)
	}
	job, err := sl.p.client.BatchV1().Jobs(sl.p.ns).Get(ctx, sl.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: its job is gone", ErrSlotChanged)
	case err != nil:
		return nil, fmt.Errorf("warm slot %s: %w", sl.ID, err)
	case job.UID != sl.job || job.DeletionTimestamp != nil:
		return nil, fmt.Errorf("%w: its job was replaced or is being deleted", ErrSlotChanged)
	case job.Annotations[annotationClaimed] != "":
		return nil, fmt.Errorf("%w: its job was claimed already", ErrSlotChanged)
	case !slotLabelled(job.Spec.Template.Labels, sl.ID) || containersHash(job.Spec.Template.Spec) != sl.pod:
		return nil, fmt.Errorf("%w: its job's pod template changed", ErrSlotChanged)
	case !sl.p.pullMatches(job.Spec.Template.Spec):
		return nil, fmt.Errorf("%w: its pod was made under other image pull settings than the target's now (%s)", ErrSlotChanged, sl.p.pullString())
	}
	pod, err := sl.findPod(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrSlotChanged, err)
	case pod == nil:
		return nil, fmt.Errorf("%w: its pod is gone", ErrSlotChanged)
	case pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning:
		return nil, fmt.Errorf("%w: its pod is %s", ErrSlotChanged, pod.Status.Phase)
	case !slotLabelled(pod.Labels, sl.ID):
		return nil, fmt.Errorf("%w: its pod's labels changed (its network policy would not select it)", ErrSlotChanged)
	case !fillerWaits(pod):
		return nil, fmt.Errorf("%w: its filler ended before the claim, or a container of its pod restarted", ErrSlotChanged)
	case len(pod.Spec.EphemeralContainers) != 0:
		// kubectl debug: a container of someone's joined the pod (its volumes, the worker's
		// processes) while it waited.
		return nil, fmt.Errorf("%w: its pod was given an ephemeral container", ErrSlotChanged)
	case containersHash(pod.Spec) != sl.pod:
		return nil, fmt.Errorf("%w: its pod's containers or volumes changed", ErrSlotChanged)
	}
	return pod, sl.p.checkOtherPolicies(ctx, sl.np, pod.Labels)
}

// checkOtherPolicies refuses a slot pod that another NetworkPolicy of the namespace singles
// out with an allow rule: policies add up, so one made while the slot waited, selecting its
// own labels (agora.slot=<id>, its job's), widens it as much as its own policy widened
// would. A policy that selects every agora pod (or every pod) applies to a cold pod
// alike and is the operator's: it is left to them.
// (own is the slot's or pool's policy.)
func (p *Provider) checkOtherPolicies(ctx context.Context, own types.UID, podLabels map[string]string) error {
	l, err := p.client.NetworkingV1().NetworkPolicies(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("warm slot: list network policies: %w", err)
	}
	shared := k8slabels.Set{labelManagedBy: managedBy}
	for k, v := range p.templateLabels("x") {
		if k != labelDispatch {
			shared[k] = v // the test-only labels every pod of this provider carries
		}
	}
	for i := range l.Items {
		np := &l.Items[i]
		if np.UID == own || (len(np.Spec.Ingress) == 0 && len(np.Spec.Egress) == 0) {
			continue // its own, or one that allows nothing
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			return fmt.Errorf("%w: network policy %s has a selector agora cannot read: %v", ErrSlotChanged, np.Name, err)
		}
		if sel.Matches(k8slabels.Set(podLabels)) && !sel.Matches(shared) {
			return fmt.Errorf("%w: network policy %s selects its pod and admits traffic", ErrSlotChanged, np.Name)
		}
	}
	return nil
}

// slotLabelled reports whether l carries every label of slot id's objects.
func slotLabelled(l map[string]string, id string) bool {
	want := labels(id)
	want[labelSlot] = id
	for k, v := range want {
		if l[k] != v {
			return false
		}
	}
	return true
}

// Bind hands the slot's worker a dispatch: bind is the gateway slot's Bind (it returns once the
// worker took the grant; the slot's token is dead from then on).
type Bind func(ctx context.Context, dispatch, token string) error

// Run runs s in the slot: the slot is checked, its Job marked claimed, s is exported to the
// gateway (its read-only mounts must be exactly the slot's places, its others below /agora,
// where the slot's worker fetches them) and
// bound to the slot, and the Job's deadline set to s's timeout from the claim. The slot is spent whatever happens; an
// error means s did not start and may start cold. The handle follows the slot's Job.
func (sl *Slot) Run(ctx context.Context, s compute.Spec, bind Bind) (compute.Handle, error) {
	if sl.spend() {
		return nil, fmt.Errorf("%w: spent already", ErrSlotChanged)
	}
	if SlotShape(s) != SlotShape(sl.spec) {
		sl.kill()
		return nil, fmt.Errorf("warm slot %s: the dispatch's shape is not the slot's", sl.ID)
	}
	if !sameUser(s.RunAs, sl.spec.RunAs) {
		// The pod's uid is fixed in its spec: a dispatch leased another uid (or none) would run
		// as a uid it does not hold, perhaps one another running dispatch holds.
		sl.kill()
		return nil, fmt.Errorf("warm slot %s: the dispatch runs as %s, the slot's pod as %s", sl.ID, userString(s.RunAs), userString(sl.spec.RunAs))
	}
	if err := checkDispatchID(s.ID); err != nil {
		sl.kill()
		return nil, err
	}
	pod, err := sl.check(ctx)
	if err != nil {
		sl.kill()
		return nil, err
	}
	// Claimed before the bind: the gateway removes the slot as its worker takes the grant,
	// and a Job neither live nor marked claimed is a dead holder's to any sweep of the home (a
	// second serve, serve before its next standby): marked after the bind, the Job running the
	// dispatch and its NetworkPolicy could be deleted in between. The deadline is the
	// dispatch's timeout from now plus claimSlack until the bind returns, then set exactly: a
	// holder killed in between leaves a Job that still ends.
	if err := sl.markClaimed(ctx, s.ID, pod.UID, s.Limits.Timeout, claimSlack); err != nil {
		sl.kill()
		return nil, err
	}
	exported := s
	exported.Binds = nil
	for _, b := range s.Binds {
		if b.Dst != s.Argv[0] {
			exported.Binds = append(exported.Binds, b)
		}
	}
	sess, err := sl.p.opts.Exporter.Export(ctx, exported)
	if err == nil && sess.Dispatch != s.ID {
		err = fmt.Errorf("the gateway exported dispatch %q for %q", sess.Dispatch, s.ID)
	}
	if err == nil {
		err = checkSlotMounts(sess.Mounts, sl.places)
	}
	if err == nil {
		err = bind(ctx, sess.Dispatch, sess.Token)
	}
	if err != nil {
		sl.kill()
		return nil, errors.Join(fmt.Errorf("warm slot %s: %w", sl.ID, err), closeSession(sess))
	}
	if s.Limits.Timeout > 0 {
		if err := sl.markClaimed(ctx, s.ID, pod.UID, s.Limits.Timeout, 0); err != nil {
			sl.kill()
			return nil, errors.Join(err, closeSession(sess))
		}
	}
	follow := compute.Spec{ID: sl.ID, Stderr: s.Stderr}
	return sl.p.followSlot(ctx, follow, sl.name, sl.job, sess, sl.sec, time.Now(), pod.UID), nil
}

// claimSlack is how long past its dispatch's timeout a slot's Job may run when its holder died
// between marking it claimed and its bind (the exact deadline is set once the bind returned).
const claimSlack = time.Minute

// markClaimed marks the slot's Job (its uid a precondition) claimed by dispatch in pod (the
// one the claim checked), with the dispatch's timeout plus slack, counted from now on a Job
// that started earlier, as its deadline (none for no timeout).
func (sl *Slot) markClaimed(ctx context.Context, dispatch string, pod types.UID, timeout, slack time.Duration) error {
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"annotations":{%q:%q,%q:%q}}`, sl.job, annotationClaimed, dispatch, annotationClaimedPod, pod)
	if timeout > 0 {
		deadline := int64((time.Since(sl.start)+timeout+slack+time.Second-1)/time.Second) + 1
		patch = fmt.Appendf(patch, `,"spec":{"activeDeadlineSeconds":%d}`, deadline)
	}
	patch = append(patch, '}')
	if _, err := sl.p.client.BatchV1().Jobs(sl.p.ns).Patch(ctx, sl.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("warm slot %s: mark its job claimed: %w", sl.ID, err)
	}
	return nil
}

// Shape implements warm.Slot.
func (sl *Slot) Shape() string { return SlotShape(sl.spec) }

// Discard deletes a slot never claimed: its Job (foreground: its pod goes first), then its
// Secret and NetworkPolicy if the Job did not own them yet.
func (sl *Slot) Discard() {
	sl.spend()
	sl.kill()
}

func (sl *Slot) kill() {
	if sl.job != "" {
		_ = sl.p.deleteJob(sl.name, sl.job)
	}
	_ = sl.p.deleteParts(sl.name, sl.np, sl.sec)
}

// SweepSlots deletes the slot Jobs of home ([SlotOptions.Home]) in this namespace whose slot
// no longer stands (live says whether the gateway's slot id does: a killed holder's slots were
// revoked by the gateway's sweep) and that no dispatch claimed. A claimed slot's Job runs to
// its deadline; another home's slots are never touched. It returns the slots whose Jobs it
// deleted.
func (p *Provider) SweepSlots(ctx context.Context, home string, live func(id string) bool) ([]string, error) {
	if !validHome(home) {
		return nil, fmt.Errorf("sweep warm slots: home %q: want [a-z0-9], 1 to %d bytes", home, maxName)
	}
	l, err := p.client.BatchV1().Jobs(p.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labelManagedBy + "=" + managedBy + "," + labelSlot + "," + labelHome + "=" + home})
	if err != nil {
		return nil, fmt.Errorf("list warm slot jobs: %w", err)
	}
	var gone []string
	var errs []error
	kept := map[string]bool{} // slots whose Job stands: its parts are its
	for _, j := range l.Items {
		id := j.Labels[labelSlot]
		if !deadSlotJob(&j, home, live) {
			kept[id] = true
			continue
		}
		swept, err := p.sweepJob(&j, home, live)
		if err != nil || !swept {
			kept[id] = true
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		gone = append(gone, id)
	}
	parts, err := p.sweepSlotParts(ctx, home, live, kept)
	for _, id := range parts {
		if !slices.Contains(gone, id) {
			gone = append(gone, id)
		}
	}
	return gone, errors.Join(append(errs, err)...)
}

// deadSlotJob tells whether j is a slot Job of home that no dispatch claimed and whose slot
// no longer stands at the gateway: the sweep's to delete.
func deadSlotJob(j *batchv1.Job, home string, live func(id string) bool) bool {
	id := j.Labels[labelSlot]
	return remote.ValidSlotID(id) && j.Name == objectName(id) && j.Labels[labelHome] == home &&
		j.Annotations[annotationClaimed] == "" && !live(id)
}

// sweepConflicts bounds how often sweepJob reads a dead slot's Job again after its delete
// conflicted: the Job controller updates a new Job's status a few times (active, ready), and
// a Job that keeps changing is left to the next sweep.
const sweepConflicts = 5

// sweepJob deletes the dead slot Job j only as it was read (its uid and resourceVersion) and
// reports whether it did. Between the read and the live check a holder may have marked the Job
// claimed, bound the dispatch and seen its slot's directory go (a claimed slot is no longer
// live at the gateway); the claim's mark changed the resourceVersion, so the delete conflicts.
// A conflict reads the Job again and deletes it only if it is still dead (deadSlotJob), as
// read: the claimed Job stands, and one that only the Job controller's status update changed
// (as it does for a slot just started) is still swept.
func (p *Provider) sweepJob(j *batchv1.Job, home string, live func(id string) bool) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	name, uid, rv := j.Name, j.UID, j.ResourceVersion
	for range sweepConflicts {
		// Before every delete: a leader that lost its lease while it read the Job again
		// deletes nothing.
		if err := fenced(fmt.Sprintf("sweep warm slot job %q", name)); err != nil {
			return false, err
		}
		err := p.client.BatchV1().Jobs(p.ns).Delete(ctx, name, metav1.DeleteOptions{
			PropagationPolicy: ptrTo(metav1.DeletePropagationForeground),
			Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !apierrors.IsConflict(err):
			return false, fmt.Errorf("delete warm slot job %q: %w", name, err)
		}
		now, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("read warm slot job %q again: %w", name, err)
		case now.UID != uid || now.DeletionTimestamp != nil || !deadSlotJob(now, home, live):
			return false, nil
		}
		rv = now.ResourceVersion
	}
	return false, nil
}

// sweepSlotParts deletes the NetworkPolicies (and their Secrets) of home's dead slots that no
// standing Job owns: a holder killed inside StartSlot, after its policy and before its Job
// owned it, leaves them (as does a Job deleted by the sweep before it owned
// its parts leaves them too). A live slot's parts are its holder's, being made or waiting.
func (p *Provider) sweepSlotParts(ctx context.Context, home string, live func(id string) bool, kept map[string]bool) ([]string, error) {
	l, err := p.client.NetworkingV1().NetworkPolicies(p.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labelManagedBy + "=" + managedBy + "," + labelSlot + "," + labelHome + "=" + home})
	if err != nil {
		return nil, fmt.Errorf("list warm slot network policies: %w", err)
	}
	var gone []string
	var errs []error
	for _, np := range l.Items {
		id := np.Labels[labelSlot]
		if !remote.ValidSlotID(id) || np.Name != objectName(id) || np.Labels[labelHome] != home || kept[id] || live(id) {
			continue
		}
		// A Job made after the list above (and claimed since, so no longer live) owns these
		// parts: look again before taking them.
		if _, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, np.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			if err != nil {
				errs = append(errs, fmt.Errorf("look for warm slot job %q: %w", np.Name, err))
			}
			continue
		}
		if err := p.sweepParts(np.Name, np.UID); err != nil {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, id)
	}
	return gone, errors.Join(errs...)
}

// sameUser reports whether a and b name the same uid and gid (both unset is the same).
func sameUser(a, b *compute.HostUser) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.GID == b.GID
}

// userString is u for an error: "uid:gid", or the words for none.
func userString(u *compute.HostUser) string {
	if u == nil {
		return "its id's own uid (no lease)"
	}
	return fmt.Sprintf("%d:%d", u.UID, u.GID)
}
