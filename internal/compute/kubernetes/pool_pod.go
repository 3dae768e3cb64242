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
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// A pool's pod (pool.go) is a Job backend's pod (jobObject) turned into a warm one: its
// worker claims ([remote.SlotEnv]): it waits on the gateway until a dispatch is bound to its
// pod, fetches that dispatch's mounts below /agora (an emptyDir) and runs it as a cold pod's
// worker does.

// Slot labels and annotations.
const (
	labelSlot = "agora.slot"
	// labelHome names the home whose holder made the slot: a namespace several agora homes
	// share keeps each home's sweep to its own slots.
	labelHome = "agora.home"
	// slotRootVolume is the slot pod's writable /agora, where the worker fetches its
	// dispatch's mounts at the claim.
	slotRootVolume = "root"
	// slotRoot is the layout root the slot's worker fetches below.
	slotRoot = "/agora"
)

// proxyTokenEnv is the worker's egress proxy password variable (wire.ProxyTokenEnv, which
// this host-side package does not import; a test pins the two equal).
const proxyTokenEnv = "AGORA_PROXY_TOKEN"

// slotReadyWait bounds how long a pool's Sandbox may stand without its pod before a refresh
// takes it for one that will never run.
var slotReadyWait = 5 * time.Minute

// claimSlack is how long past its dispatch's timeout a claimed pod may run when its
// supervisor died before the claim's end was set from the dispatch's timeout.
const claimSlack = time.Minute

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

// slotJobObject is a cold Job's object turned into a slot's: the init container only copies
// the worker binary and makes the places' entries (no token, no dispatch), the worker
// container claims (the slot's id in its environment, the slot's token from the Secret) and
// has a writable /agora to fetch into, with a read-only mount at each place, which the filler
// fills at the claim (pool_places.go).
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

// specHash is a hash of v's JSON (a NetworkPolicy's spec).
func specHash(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ErrSlotChanged: the slot's Job or pod is gone or not as agora made it; it is never claimed.
var ErrSlotChanged = errors.New("warm slot changed or gone")

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
