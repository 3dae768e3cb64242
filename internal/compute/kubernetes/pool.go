package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// Pool slots: the warm slots of a `backend: agent-sandbox` target, kept by agent-sandbox's
// own SandboxWarmPool and claimed through its SandboxClaim. agora makes, named
// agora-pool-<hash of the pod spec and home> (<name>):
//
//   - a NetworkPolicy selecting every pod of the pool (agora.pool=<name>): no ingress, egress
//     to the gateway alone. A claim cannot relabel a pod (the controller takes claim labels
//     only under its own domains), so a claimed pod is confined by the pool's policy, which is
//     the policy a cold pod gets. It is made first and never owned: it stands while any pod of
//     the pool may run;
//   - a NetworkPolicy that admits nothing, named <name>-network-policy as agent-sandbox's
//     controller names a Managed template's policy (pool_guard.go): a template turned Managed
//     behind agora's back, after a claim, never gets the controller's policy, which would
//     admit public egress to the claimed pods;
//   - a Secret with the gateway's CA and the template's environment: no token (every pod of a
//     pool reads the same Secret);
//   - a SandboxTemplate whose pod is a Job slot's pod (the worker in claim mode, the read-only
//     places and their filler) with networkPolicyManagement Unmanaged (the controller's
//     Managed policy admits every public address), envVarsInjectionPolicy and
//     volumeClaimTemplatesPolicy Disallowed, service false, run as the pool's ServiceAccount
//     (agora-pool: no RBAC binding, automountServiceAccountToken false) with one projected
//     token, for the gateway's audience alone, bound to the pod, mounted in the init step only;
//   - a SandboxWarmPool of N of it.
//
// Each pool pod's init step enrols with its projected token (netgw/pool.go: verified with a
// TokenReview, once per pod uid) and gets a slot of its own, which its worker then claims. A
// dispatch makes a SandboxClaim of the pool; the controller hands it a warm Sandbox; agora
// checks that Sandbox and its pod (the hardening rules of checkSandbox, the pool's policy and
// template as made, no other policy singling the pod out), binds the dispatch to the pod's
// slot by the pod's uid, and follows the Sandbox as a cold dispatch's. At its end agora deletes
// the claim, and the controller the Sandbox and pod: a pod runs one dispatch.

// Pool names and settings.
const (
	// PoolServiceAccount is the ServiceAccount every pool pod runs as: made by the operator
	// (examples/kubernetes/rbac.yaml, the Helm chart) with no role bound and no token mounted.
	PoolServiceAccount = "agora-pool"
	labelPool          = "agora.pool"
	// poolPrefix names a pool's objects.
	poolPrefix = "agora-pool-"
	// The projected token's volume, in the init step only, and the enrolment's answer's.
	poolTokenVolume  = "identity"
	poolTokenDir     = "/var/run/agora/identity"
	poolTokenFile    = poolTokenDir + "/token"
	poolEnrollVolume = "enroll"
	poolEnrollDir    = slotRoot + "/enroll"
	poolSlotFile     = poolEnrollDir + "/slot"
	// poolTokenExpiry is the projected token's life (the apiserver's minimum): the kubelet
	// renews it, but the init step presents it at the pod's start, once.
	poolTokenExpiry = 600
	// annotationPodSpec, on a pool's template, is a hash of the pod spec agora made it with.
	annotationPodSpec = "agora.dev/pod-spec"
	// annotationBoundPod, on a claimed Sandbox, is the uid of the pod its dispatch is bound
	// to (pool_adopt.go).
	annotationBoundPod = "agora.dev/bound-pod"
	// sandboxNameAnnotation: the claim controller names the claim's Sandbox here.
	sandboxNameAnnotation = "agents.x-k8s.io/sandbox-name"
	// launchTypeLabel says whether a claim's Sandbox came from the pool ("warm").
	launchTypeLabel = "agents.x-k8s.io/launch-type"
)

// claimAssignWait bounds how long a dispatch waits for the controller to hand its claim a
// Sandbox before it starts cold.
var claimAssignWait = 10 * time.Second

// assignPoll is how often a dispatch looks at its claim while the controller hands it a
// Sandbox: a hand-over takes tens of milliseconds, and the dispatch waits for it (a watch would
// need the Role's watch on claims).
const assignPoll = 10 * time.Millisecond

// poolBindWait bounds how long a dispatch waits for its claimed pod's worker to take it.
var poolBindWait = 30 * time.Second

// PoolAudience is the audience of home's pool pods' projected tokens: the gateway's alone,
// so the apiserver refuses them (its own audience is another), and another home's gateway too.
func PoolAudience(home string) string { return "agora-gateway." + home }

// PoolOptions say what a pool is beyond its template spec.
type PoolOptions struct {
	// Home is the holder's home's identity ([compute.PoolOptions.Home]): the pool's audience and labels.
	Home string
	// Replicas is the pool's size (the target's warm: N).
	Replicas int32
	// Places are the template's read-only places ([Places]).
	Places []remote.SlotPlace
}

// Pool is one SandboxWarmPool of agora's, as made (or found as made) by [Provider.EnsurePool].
type Pool struct {
	p      *Provider
	Name   string
	home   string
	spec   compute.Spec // the template (its ID is the pool's)
	places []remote.SlotPlace

	tmplUID types.UID
	tmplSum string // a hash of the template's spec as stored
	npUID   types.UID
	npSum   string
	podSum  string // a hash of the pod spec agora built
}

// poolObjects are a pool's objects as agora builds them.
type poolObjects struct {
	name   string
	np     *networkingv1.NetworkPolicy
	secret *corev1.Secret
	tmpl   *templateObject
	pool   *warmPoolObject
	podSum string
}

// poolTemplateSpec is the SandboxTemplate spec agora writes.
type poolTemplateSpec struct {
	PodTemplate                sandboxPodTemplate `json:"podTemplate"`
	Service                    *bool              `json:"service"`
	NetworkPolicyManagement    string             `json:"networkPolicyManagement"`
	EnvVarsInjectionPolicy     string             `json:"envVarsInjectionPolicy"`
	VolumeClaimTemplatesPolicy string             `json:"volumeClaimTemplatesPolicy"`
}

// poolLabels are the labels of a pool's pods and objects.
func poolLabels(name, home string) map[string]string {
	return map[string]string{labelManagedBy: managedBy, labelPool: name, labelHome: home}
}

// poolPodLabels are poolLabels and the test-only ones every pod of this provider carries.
func (p *Provider) poolPodLabels(name, home string) (map[string]string, map[string]string) {
	m := metav1.ObjectMeta{Labels: poolLabels(name, home)}
	if p.testOnlyPodMeta != nil {
		p.testOnlyPodMeta(&m)
	}
	return m.Labels, m.Annotations
}

// buildPool builds the pool's objects for tmpl.
func (p *Provider) buildPool(tmpl compute.Spec, env []envVar, gw gatewayAddr, o PoolOptions, name string) (*poolObjects, error) {
	id := tmpl.ID
	job := p.slotJobObject(jobInput{name: name, id: id, spec: tmpl, env: env, gateway: gw}, o.Places)
	pod := job.Spec.Template.Spec
	// No token in the pod's spec: not the slot's (SlotEnv, TokenEnv), not a dispatch's.
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range cs {
			cs[i].Env = slices.DeleteFunc(cs[i].Env, func(e corev1.EnvVar) bool {
				return e.Name == remote.SlotEnv || e.Name == remote.TokenEnv
			})
		}
	}
	fetch, w := &pod.InitContainers[0], &pod.Containers[0]
	fetch.Env = append(fetch.Env,
		corev1.EnvVar{Name: remote.GatewayURLEnv, Value: p.opts.GatewayURL},
		secretRef(remote.CAEnv, name, secretCA),
		corev1.EnvVar{Name: remote.SlotEnrollEnv, Value: poolTokenFile},
		corev1.EnvVar{Name: remote.SlotFileEnv, Value: poolSlotFile})
	fetch.VolumeMounts = append(fetch.VolumeMounts,
		corev1.VolumeMount{Name: poolTokenVolume, MountPath: poolTokenDir, ReadOnly: true},
		corev1.VolumeMount{Name: poolEnrollVolume, MountPath: poolEnrollDir})
	w.Env = append(w.Env, corev1.EnvVar{Name: remote.SlotFileEnv, Value: poolSlotFile})
	w.VolumeMounts = append(w.VolumeMounts, corev1.VolumeMount{Name: poolEnrollVolume, MountPath: poolEnrollDir})
	pod.Volumes = append(pod.Volumes,
		corev1.Volume{Name: poolEnrollVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(64<<10, resource.BinarySI)}}},
		corev1.Volume{Name: poolTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptrTo(int32(0o440)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: PoolAudience(o.Home), ExpirationSeconds: ptrTo(int64(poolTokenExpiry)), Path: "token"}}},
		}}})
	pod.ServiceAccountName = PoolServiceAccount
	pod.AutomountServiceAccountToken = ptrTo(false)
	// No deadline until the claim: the dispatch's handle times it (and its claim's
	// shutdownTime bounds a pod whose supervisor died).
	pod.ActiveDeadlineSeconds = nil
	lbl, ann := p.poolPodLabels(name, o.Home)
	meta := poolLabels(name, o.Home)

	np := networkPolicyObject(p.ns, name, id, gw)
	np.Labels = meta
	np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{labelManagedBy: managedBy, labelPool: name}}
	sec := secretObject(p.ns, name, id, "", p.opts.GatewayCA, env)
	delete(sec.Data, secretToken)
	sec.Labels = meta

	sum := specHash(pod)
	ts := poolTemplateSpec{
		PodTemplate:             sandboxPodTemplate{Metadata: sandboxPodMetadata{Labels: lbl, Annotations: ann}, Spec: pod},
		Service:                 ptrTo(false),
		NetworkPolicyManagement: "Unmanaged", EnvVarsInjectionPolicy: "Disallowed", VolumeClaimTemplatesPolicy: "Disallowed",
	}
	tb, err := json.Marshal(ts)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", name, err)
	}
	pb, _ := json.Marshal(map[string]any{
		"replicas":           o.Replicas,
		"sandboxTemplateRef": map[string]string{"name": name},
		// A template edited behind agora's back replaces the unclaimed pods at once (and the
		// claim's check refuses any made from it anyway).
		"updateStrategy": map[string]string{"type": "Recreate"},
	})
	return &poolObjects{
		name: name, np: np, secret: sec, podSum: sum,
		tmpl: &templateObject{extObject{TypeMeta: metav1.TypeMeta{APIVersion: extGroupVersion.String(), Kind: "SandboxTemplate"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: meta, Annotations: map[string]string{annotationPodSpec: sum}}, Spec: tb}},
		pool: &warmPoolObject{extObject{TypeMeta: metav1.TypeMeta{APIVersion: extGroupVersion.String(), Kind: "SandboxWarmPool"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: meta}, Spec: pb}},
	}, nil
}

// PoolName is the name of home's pool of template spec with places on this target: a hash of
// everything its pods are made from, so a changed target or template is another pool.
//
// The settings hashed only when set leave the name of a pool of a target without them as it
// was: its pods are the same.
func (p *Provider) PoolName(spec compute.Spec, o PoolOptions) string {
	b, _ := json.Marshal(struct {
		Shape, Home, Image, Worker, RC, URL, NS string
		Places                                  []remote.SlotPlace
		Limits                                  compute.Limits
		Opts                                    any
		UID                                     uint32       `json:",omitempty"` // the pods' uid
		Peer                                    *GatewayPeer `json:",omitempty"` // the policy's egress
		CPU, Memory                             string       `json:",omitempty"` // the pods' resources
	}{SlotShape(spec), o.Home, p.opts.Image, p.opts.WorkerImage, p.opts.RuntimeClass, p.opts.GatewayURL, p.ns, o.Places, spec.Limits,
		[]any{p.opts.NodeSelector, p.pullString(), string(p.opts.GatewayCA)}, p.opts.SandboxUID, p.opts.GatewayPeer, p.opts.CPU, p.opts.Memory})
	sum := sha256.Sum256(b)
	return poolPrefix + hex.EncodeToString(sum[:8])
}

// PoolSum is the name and the pod spec's digest of the pool EnsurePool makes for template spec
// and o: what the gateway's enrolment holds a pool pod to (PoolVerifier.Pools). It makes and
// reads nothing in the cluster.
func (p *Provider) PoolSum(ctx context.Context, spec compute.Spec, o PoolOptions) (name, podSum string, err error) {
	spec.ID = ""
	pl, _, err := p.preparePool(ctx, spec, o)
	if err != nil {
		return "", "", err
	}
	return pl.Name, pl.podSum, nil
}

// EnsurePool makes home's pool of template spec, or finds it as agora made it, and sets its
// size to o.Replicas. spec is a learnt template (its ID and binds are ignored).
// A pool's pods share one uid: a spec with RunAs (a root agora leases a uid per dispatch) has
// no pool.
func (p *Provider) EnsurePool(ctx context.Context, spec compute.Spec, o PoolOptions) (*Pool, error) {
	pl, objs, err := p.preparePool(ctx, spec, o)
	if err != nil {
		return nil, err
	}
	if err := pl.make(ctx, objs, o.Replicas); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.made == nil {
		p.made = map[string]string{}
	}
	p.made[pl.Name] = pl.podSum
	p.mu.Unlock()
	return pl, nil
}

// MadePools is a PoolVerifier.Pools of the pools this provider made or found as agora makes
// them (EnsurePool): for a gateway in the process that keeps the pools.
func (p *Provider) MadePools(context.Context) (map[string]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.made), nil
}

// ErrNoPool: home has no pool of that shape (yet): its holder makes one from the target's
// last cold dispatch.
var ErrNoPool = errors.New("no warm pool of the dispatch's shape")

// OpenPool finds home's pool of spec's shape as agora made it ([Provider.EnsurePool], by the
// holder: orch serve, agora mcp, a resident Dispatcher) and writes nothing: any supervisor of
// the home claims from it. spec is the dispatch's own: a pool is named for its shape, so a
// dispatch of another shape finds none ([ErrNoPool]). Objects of that name that are not
// agora's as made are refused as EnsurePool refuses them (ErrSlotChanged).
func (p *Provider) OpenPool(ctx context.Context, spec compute.Spec, o PoolOptions) (*Pool, error) {
	return p.openPool(ctx, spec, o, true)
}

// openPool is OpenPool; without needTemplate a pool whose template is gone (or going) is
// opened from its policy alone (an adopter's: pool_adopt.go), its template still refused when
// it stands and is not agora's as made.
func (p *Provider) openPool(ctx context.Context, spec compute.Spec, o PoolOptions, needTemplate bool) (*Pool, error) {
	spec.ID = "" // a dispatch's id is not the template's
	pl, objs, err := p.preparePool(ctx, spec, o)
	if err != nil {
		return nil, err
	}
	np, err := p.findPolicy(ctx, objs.name)
	switch {
	case err != nil:
		return nil, fmt.Errorf("pool %s: %w", objs.name, err)
	case np == nil:
		return nil, ErrNoPool
	case np.Labels[labelPool] != objs.name || np.Labels[labelManagedBy] != managedBy || specHash(np.Spec) != specHash(objs.np.Spec) || np.DeletionTimestamp != nil:
		return nil, fmt.Errorf("%w: network policy %s is not the pool's as agora makes it", ErrSlotChanged, objs.name)
	}
	pl.npUID, pl.npSum = np.UID, specHash(np.Spec)
	t, err := p.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, objs.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !needTemplate:
		return pl, nil
	case apierrors.IsNotFound(err):
		return nil, ErrNoPool
	case err != nil:
		return nil, fmt.Errorf("pool %s: sandbox template: %w", objs.name, err)
	case t.Labels[labelPool] != objs.name || t.Labels[labelManagedBy] != managedBy || t.Labels[labelHome] != o.Home || t.Annotations[annotationPodSpec] != objs.podSum:
		return nil, fmt.Errorf("%w: sandbox template %s is not the pool's as agora makes it", ErrSlotChanged, objs.name)
	case t.DeletionTimestamp != nil && !needTemplate:
		return pl, nil
	case t.DeletionTimestamp != nil:
		return nil, ErrNoPool
	}
	pl.tmplUID, pl.tmplSum = t.UID, specHash(t.Spec)
	if err := pl.checkTemplate(t); err != nil {
		return nil, err
	}
	return pl, nil
}

// Ready is how many of the pool's pods its SandboxWarmPool counts ready: 0 when the pool is
// gone. A claim when none is ready would wait for the controller to make a Sandbox cold
// (refused: it never enrolled), so the dispatch starts cold at once instead.
func (pl *Pool) Ready(ctx context.Context) (int, error) {
	wp, err := pl.p.client.ExtensionsV1beta1().SandboxWarmPools(pl.p.ns).Get(ctx, pl.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pool %s: %w", pl.Name, err)
	}
	if wp.Labels[labelPool] != pl.Name || wp.Labels[labelManagedBy] != managedBy || wp.Labels[labelHome] != pl.home {
		return 0, fmt.Errorf("%w: sandbox warm pool %s is not the pool's as agora makes it", ErrSlotChanged, pl.Name)
	}
	var st struct {
		ReadyReplicas int `json:"readyReplicas"`
	}
	if len(wp.Status) > 0 {
		if err := json.Unmarshal(wp.Status, &st); err != nil {
			return 0, fmt.Errorf("pool %s: status: %w", pl.Name, err)
		}
	}
	return st.ReadyReplicas, nil
}

// preparePool checks spec and o and builds home's pool's objects and its Pool, unmade.
func (p *Provider) preparePool(ctx context.Context, spec compute.Spec, o PoolOptions) (*Pool, *poolObjects, error) {
	if !validHome(o.Home) {
		return nil, nil, fmt.Errorf("pool: home %q: want [a-z0-9], 1 to %d bytes", o.Home, maxName)
	}
	if spec.RunAs != nil {
		return nil, nil, errors.New("pool: a pool's pods share one uid, and this agora leases one per dispatch (it runs as root); such dispatches start cold")
	}
	for _, kv := range spec.Env {
		if strings.HasPrefix(kv, proxyTokenEnv+"=") {
			return nil, nil, fmt.Errorf("pool: the template holds the egress proxy's password (%s); such dispatches start cold", proxyTokenEnv)
		}
	}
	if err := checkPlaces(o.Places, spec.Argv); err != nil {
		return nil, nil, fmt.Errorf("pool: %w", err)
	}
	name := p.PoolName(spec, o)
	sum := sha256.Sum256([]byte(name))
	id := "s" + hex.EncodeToString(sum[:16]) // a slot id's shape: the pool's pods' uid hashes from it
	tmpl := compute.Spec{ID: id, Argv: spec.Argv, Env: slotEnv(spec.Env), Limits: spec.Limits, Sandbox: spec.Sandbox, Dir: "/tmp",
		Binds: slices.Clone(spec.Binds)}
	env, err := p.checkSpec(tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", name, err)
	}
	gw, err := p.resolveGateway(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", name, err)
	}
	objs, err := p.buildPool(tmpl, env, gw, o, name)
	if err != nil {
		return nil, nil, err
	}
	// The rules a Sandbox of the pool is held to, before anything is made (a bug in the
	// builder fails closed).
	var ts poolTemplateSpec
	_ = json.Unmarshal(objs.tmpl.Spec, &ts)
	if err := p.checkPoolPod(ts.PodTemplate.Metadata.Labels, ts.PodTemplate.Metadata.Annotations, &ts.PodTemplate.Spec, tmpl, name, o.Home); err != nil {
		return nil, nil, fmt.Errorf("pool %s: %w", name, err)
	}
	return &Pool{p: p, Name: name, home: o.Home, spec: tmpl, places: slices.Clone(o.Places), podSum: objs.podSum}, objs, nil
}

// make creates the pool's objects in order (the policy first: no pod of the pool is ever
// unconfined), or takes those that exist when they are agora's as made, and renews the
// template's lease (pool_lease.go).
func (pl *Pool) make(ctx context.Context, o *poolObjects, replicas int32) error {
	p := pl.p
	np, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Create(ctx, o.np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		np, err = p.findPolicy(ctx, o.name)
		if err == nil && (np == nil || np.Labels[labelPool] != o.name || np.Labels[labelManagedBy] != managedBy || specHash(np.Spec) != specHash(o.np.Spec)) {
			err = fmt.Errorf("network policy %s is not the pool's as agora makes it", o.name)
		}
	}
	if err != nil {
		return fmt.Errorf("pool %s: network policy: %w", o.name, err)
	}
	pl.npUID, pl.npSum = np.UID, specHash(np.Spec)
	// Before the template: the controller never sees it Managed with the name free.
	if err := p.makeGuard(ctx, guardPolicyObject(p.ns, o.name, pl.home)); err != nil {
		return fmt.Errorf("pool %s: %w", o.name, err)
	}
	tmpls := p.client.ExtensionsV1beta1().SandboxTemplates(p.ns)
	o.tmpl.Annotations[annotationHeldUntil] = p.heldUntil(time.Now()) // the maker's lease (pool_lease.go)
	t, err := tmpls.Create(ctx, o.tmpl, metav1.CreateOptions{})
	found := apierrors.IsAlreadyExists(err)
	if found {
		t, err = tmpls.Get(ctx, o.name, metav1.GetOptions{})
		switch {
		case err != nil:
		case t.Labels[labelPool] != o.name || t.Annotations[annotationPodSpec] != o.podSum:
			err = fmt.Errorf("sandbox template %s is not the pool's as agora makes it", o.name)
		case t.DeletionTimestamp != nil:
			err = fmt.Errorf("sandbox template %s is being deleted", o.name)
		}
	}
	if apierrors.IsNotFound(err) {
		err = fmt.Errorf("%w (is agent-sandbox installed with its extensions? its CRD %s is needed)", err, SandboxTemplateCRD)
	}
	if err != nil {
		return fmt.Errorf("pool %s: sandbox template: %w", o.name, err)
	}
	pl.tmplUID, pl.tmplSum = t.UID, specHash(t.Spec)
	if err := pl.checkTemplate(t); err != nil {
		return err
	}
	if found {
		if err := pl.renew(ctx); err != nil {
			return err
		}
	}
	owner := []metav1.OwnerReference{{APIVersion: extGroupVersion.String(), Kind: "SandboxTemplate", Name: o.name, UID: t.UID}}
	o.secret.OwnerReferences = owner
	if _, err := p.client.CoreV1().Secrets(p.ns).Create(ctx, o.secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("pool %s: secret: %w", o.name, err)
	}
	o.pool.OwnerReferences = owner
	pools := p.client.ExtensionsV1beta1().SandboxWarmPools(p.ns)
	if _, err := pools.Create(ctx, o.pool, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
		_, err = pools.Patch(ctx, o.name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("pool %s: resize: %w", o.name, err)
		}
	} else if err != nil {
		return fmt.Errorf("pool %s: sandbox warm pool: %w", o.name, err)
	}
	return nil
}

// checkTemplate refuses a pool template that is not agora's as made: its settings that loosen
// isolation (a Managed policy, env or volume claim injection, a Service) and its pod.
func (pl *Pool) checkTemplate(t *templateObject) error {
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(t.Spec, &spec); err != nil {
		return fmt.Errorf("%w: sandbox template %s: %v", ErrSlotChanged, t.Name, err)
	}
	want := map[string]string{"networkPolicyManagement": `"Unmanaged"`, "envVarsInjectionPolicy": `"Disallowed"`,
		"volumeClaimTemplatesPolicy": `"Disallowed"`, "service": `false`}
	for k, v := range spec {
		switch {
		case k == "podTemplate":
		case want[k] == "":
			return fmt.Errorf("%w: sandbox template %s sets %s, which agora does not", ErrSlotChanged, t.Name, k)
		case string(v) != want[k]:
			return fmt.Errorf("%w: sandbox template %s has %s %s, want %s", ErrSlotChanged, t.Name, k, v, want[k])
		}
	}
	for k := range want {
		if _, ok := spec[k]; !ok {
			return fmt.Errorf("%w: sandbox template %s does not say %s", ErrSlotChanged, t.Name, k)
		}
	}
	var pt sandboxPodTemplate
	if err := json.Unmarshal(spec["podTemplate"], &pt); err != nil {
		return fmt.Errorf("%w: sandbox template %s: %v", ErrSlotChanged, t.Name, err)
	}
	if specHash(pt.Spec) != pl.podSum {
		return fmt.Errorf("%w: sandbox template %s's pod is not the one agora made", ErrSlotChanged, t.Name)
	}
	if err := pl.p.checkPoolPod(pt.Metadata.Labels, pt.Metadata.Annotations, &pt.Spec, pl.spec, pl.Name, pl.home); err != nil {
		return fmt.Errorf("%w: sandbox template %s: %v", ErrSlotChanged, t.Name, err)
	}
	return nil
}

// Shape is the shape of the dispatches the pool runs ([SlotShape]).
func (pl *Pool) Shape() string { return SlotShape(pl.spec) }

// PodBind binds dispatch (its session token token) to the pool pod of uid podUID: the
// gateway slots' BindPod.
type PodBind func(ctx context.Context, podUID, dispatch, token string) error

// check makes sure the pool's template and policy are still as made.
func (pl *Pool) check(ctx context.Context) error {
	p := pl.p
	t, err := p.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, pl.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: the pool's sandbox template is gone", ErrSlotChanged)
	case err != nil:
		return fmt.Errorf("pool %s: %w", pl.Name, err)
	case t.UID != pl.tmplUID || t.DeletionTimestamp != nil:
		return fmt.Errorf("%w: the pool's sandbox template was replaced or is being deleted", ErrSlotChanged)
	case specHash(t.Spec) != pl.tmplSum:
		return fmt.Errorf("%w: the pool's sandbox template was changed", ErrSlotChanged)
	}
	if err := pl.checkTemplate(t); err != nil {
		return err
	}
	np, err := p.findPolicy(ctx, pl.Name)
	switch {
	case err != nil:
		return fmt.Errorf("pool %s: %w", pl.Name, err)
	case np == nil || np.UID != pl.npUID || np.DeletionTimestamp != nil:
		return fmt.Errorf("%w: the pool's network policy is gone or replaced", ErrSlotChanged)
	case specHash(np.Spec) != pl.npSum:
		return fmt.Errorf("%w: the pool's network policy was changed", ErrSlotChanged)
	}
	return nil
}

// claimSpec is the SandboxClaim spec agora writes.
type claimSpec struct {
	WarmPoolRef struct {
		Name string `json:"name"`
	} `json:"warmPoolRef"`
	Lifecycle *claimLifecycle `json:"lifecycle,omitempty"`
}

type claimLifecycle struct {
	ShutdownTime   string `json:"shutdownTime"`
	ShutdownPolicy string `json:"shutdownPolicy"`
}

// claimStatus is what agora reads of a claim's status.
type claimStatus struct {
	Sandbox struct {
		Name string `json:"name"`
	} `json:"sandbox"`
}

// Claim runs s in a pod of the pool: it checks the pool, claims a pod with a SandboxClaim named
// for the dispatch (its shutdownTime the dispatch's timeout plus claimSlack: a supervisor
// killed after the claim leaves a pod that still ends), checks the Sandbox and pod the
// controller handed it, exports s, binds it to the pod's slot by the pod's uid, and follows the
// Sandbox as a cold dispatch's. An error means s did not start and may start cold; the claim is
// deleted then (its pod with it: a pod is never handed to two dispatches).
func (pl *Pool) Claim(ctx context.Context, s compute.Spec, bind PodBind) (compute.Handle, error) {
	p := pl.p
	if SlotShape(s) != SlotShape(pl.spec) {
		return nil, fmt.Errorf("pool %s: the dispatch's shape is not the pool's", pl.Name)
	}
	if s.RunAs != nil {
		return nil, fmt.Errorf("pool %s: the dispatch runs as a leased uid; a pool's pods share one", pl.Name)
	}
	if err := checkDispatchID(s.ID); err != nil {
		return nil, err
	}
	if err := pl.check(ctx); err != nil {
		return nil, err
	}
	claims := p.client.ExtensionsV1beta1().SandboxClaims(p.ns)
	var cs claimSpec
	cs.WarmPoolRef.Name = pl.Name
	if t := s.Limits.Timeout; t > 0 {
		cs.Lifecycle = &claimLifecycle{ShutdownTime: time.Now().Add(t + claimSlack).UTC().Format(time.RFC3339), ShutdownPolicy: "Delete"}
	}
	cb, _ := json.Marshal(cs)
	name := objectName(s.ID)
	lbl := labels(s.ID)
	lbl[labelPool] = pl.Name
	made, err := claims.Create(ctx, &claimObject{extObject{TypeMeta: metav1.TypeMeta{APIVersion: extGroupVersion.String(), Kind: "SandboxClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: lbl}, Spec: cb}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("pool %s: claim for %s: %w", pl.Name, s.ID, err)
	}
	h, err := pl.run(ctx, s, made, bind)
	if err != nil {
		return nil, errors.Join(err, p.deleteClaim(name, made.UID))
	}
	return h, nil
}

// run is Claim from the claim on.
func (pl *Pool) run(ctx context.Context, s compute.Spec, claim *claimObject, bind PodBind) (compute.Handle, error) {
	p := pl.p
	sb, err := pl.assigned(ctx, claim)
	if err != nil {
		return nil, err
	}
	pod, err := pl.checkClaimed(ctx, sb, claim, s)
	if err != nil {
		return nil, err
	}
	// The Sandbox carries the dispatch's labels, so describe, cancel and Sweep of another
	// supervisor find it as they find a cold one's (its uid a precondition), and the uid of
	// the pod the dispatch is bound to, so an adopter follows that pod and no replacement.
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"labels":{%q:%q,%q:%q},"annotations":{%q:%q}}}`,
		sb.UID, labelManagedBy, managedBy, labelDispatch, s.ID, annotationBoundPod, pod.UID)
	if _, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Patch(ctx, sb.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("pool %s: label sandbox %s: %w", pl.Name, sb.Name, err)
	}
	exported := s
	exported.Binds = nil
	for _, b := range s.Binds {
		if b.Dst != s.Argv[0] {
			exported.Binds = append(exported.Binds, b)
		}
	}
	sess, err := p.opts.Exporter.Export(ctx, exported)
	if err == nil && sess.Dispatch != s.ID {
		err = fmt.Errorf("the gateway exported dispatch %q for %q", sess.Dispatch, s.ID)
	}
	if err == nil {
		err = checkSlotMounts(sess.Mounts, pl.places)
	}
	if err == nil {
		// The pod's init step ended with 0, so it enrolled: its worker claims at once. A pod
		// that did not (its enrolment went to another gateway) is given up.
		bctx, cancel := context.WithTimeout(ctx, poolBindWait)
		err = bind(bctx, string(pod.UID), sess.Dispatch, sess.Token)
		cancel()
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pool %s: %w", pl.Name, err), closeSession(sess))
	}
	var deadline time.Time
	if t := s.Limits.Timeout; t > 0 {
		deadline = time.Now().Add(t)
	}
	h := &handle{p: p, id: s.ID, name: sb.Name, uid: sb.UID, taskID: formatTaskID(p.ns, sb.Name), sess: sess,
		stderr: s.Stderr, start: time.Now(), done: make(chan struct{}), sandbox: true,
		claim: claim.Name, claimUID: claim.UID, pool: pl.Name, deadline: deadline, podUID: pod.UID}
	p.holdSession(sb.Name)
	go h.run(ctx)
	return h, nil
}

// assigned waits for the controller to hand the claim a Sandbox from the pool.
func (pl *Pool) assigned(ctx context.Context, claim *claimObject) (*sandboxObject, error) {
	p := pl.p
	ctx, cancel := context.WithTimeout(ctx, claimAssignWait)
	defer cancel()
	for {
		c, err := p.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(ctx, claim.Name, metav1.GetOptions{})
		if err == nil && c.UID != claim.UID {
			return nil, fmt.Errorf("%w: the claim %s was replaced", ErrSlotChanged, claim.Name)
		}
		if err == nil {
			name := c.Annotations[sandboxNameAnnotation]
			if name == "" {
				var st claimStatus
				_ = json.Unmarshal(c.Status, &st)
				name = st.Sandbox.Name
			}
			if name != "" {
				// The controller names the Sandbox on the claim before it hands the Sandbox
				// over (its owner): wait for the hand-over.
				sb, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("pool %s: the claim's sandbox %s: %w", pl.Name, name, err)
				}
				if err == nil && controlledBy(sb.OwnerReferences, "SandboxClaim", claim.Name, claim.UID) {
					return sb, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no warm sandbox for the claim in %v", ErrSlotChanged, claimAssignWait)
		case <-time.After(assignPoll):
		}
	}
}

// checkClaimed checks the Sandbox the claim was handed and its pod: the claim's own (its
// controller), taken from the pool (not made cold from the template: such a pod never
// enrolled), its pod template and running pod within the hardening rules, confined by the
// pool's policy and singled out by no other, its init step done (it enrolled), no container
// restarted, no ephemeral container, its filler waiting.
func (pl *Pool) checkClaimed(ctx context.Context, sb *sandboxObject, claim *claimObject, s compute.Spec) (*corev1.Pod, error) {
	p := pl.p
	switch {
	case !controlledBy(sb.OwnerReferences, "SandboxClaim", claim.Name, claim.UID):
		return nil, fmt.Errorf("%w: sandbox %s is not the claim's", ErrSlotChanged, sb.Name)
	case sb.Labels[launchTypeLabel] != "warm":
		return nil, fmt.Errorf("%w: sandbox %s was made cold for the claim (the pool had none ready)", ErrSlotChanged, sb.Name)
	case sb.DeletionTimestamp != nil:
		return nil, fmt.Errorf("%w: sandbox %s is being deleted", ErrSlotChanged, sb.Name)
	case sb.Spec.Service == nil || *sb.Spec.Service:
		return nil, fmt.Errorf("%w: sandbox %s's spec.service is not false", ErrSlotChanged, sb.Name)
	}
	if err := p.checkPoolPod(sb.Spec.PodTemplate.Metadata.Labels, sb.Spec.PodTemplate.Metadata.Annotations, &sb.Spec.PodTemplate.Spec, pl.spec, pl.Name, pl.home); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSlotChanged, err)
	}
	if specHash(sb.Spec.PodTemplate.Spec) != pl.podSum {
		return nil, fmt.Errorf("%w: sandbox %s's pod template is not the pool's", ErrSlotChanged, sb.Name)
	}
	pod, err := p.client.CoreV1().Pods(p.ns).Get(ctx, sb.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: sandbox %s has no pod", ErrSlotChanged, sb.Name)
	case err != nil:
		return nil, fmt.Errorf("pool %s: %w", pl.Name, err)
	case !controlledBy(pod.OwnerReferences, "Sandbox", sb.Name, sb.UID):
		return nil, fmt.Errorf("%w: pod %s is not its sandbox's", ErrSlotChanged, pod.Name)
	case pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning:
		return nil, fmt.Errorf("%w: pod %s is %s", ErrSlotChanged, pod.Name, pod.Status.Phase)
	case len(pod.Spec.EphemeralContainers) != 0:
		return nil, fmt.Errorf("%w: pod %s was given an ephemeral container", ErrSlotChanged, pod.Name)
	case !initDone(pod) || !fillerWaits(pod):
		return nil, fmt.Errorf("%w: pod %s's init step did not end well, its filler ended, or a container restarted", ErrSlotChanged, pod.Name)
	}
	// The running pod as the apiserver stores it has defaults the template has not (the
	// admission's tolerations, pull policies), so it is held to its Sandbox's checked template
	// field by field where a live pod can change or differ: its labels (the policy selects
	// them), containers (an image set on the pod, an in-place resize), volumes, identity and
	// security context.
	if err := pl.podMatches(pod, &sb.Spec.PodTemplate.Spec); err != nil {
		return nil, fmt.Errorf("%w: pod %s: %v", ErrSlotChanged, pod.Name, err)
	}
	if err := p.checkOtherPolicies(ctx, pl.npUID, pod.Labels); err != nil {
		return nil, err
	}
	return pod, nil
}

// podMatches compares a running pool pod with its Sandbox's (checked) pod template.
func (pl *Pool) podMatches(pod *corev1.Pod, tmpl *corev1.PodSpec) error {
	want, _ := pl.p.poolPodLabels(pl.Name, pl.home)
	if own := podOwnLabels(pod.Labels); !maps.Equal(own, want) {
		return fmt.Errorf("its labels %v are not the pool's %v", own, want)
	}
	got := &pod.Spec
	// Besides what the container runs with, what runs commands in it or beside it: a pod
	// remade under its Sandbox's name by whoever may delete and create pods, a copy but for an
	// exec probe or hook (the kubelet runs its command in the worker's container, beside the
	// dispatch's session), would otherwise be bound a dispatch. None of these has a default
	// the apiserver adds when absent, and the template sets none but the working directory.
	type c struct {
		Name, Image, WorkingDir    string
		Command, Args              []string
		Env                        []corev1.EnvVar
		EnvFrom                    []corev1.EnvFromSource
		Mounts                     []corev1.VolumeMount
		Devices                    []corev1.VolumeDevice
		Ports                      []corev1.ContainerPort
		Sec                        *corev1.SecurityContext
		Res                        corev1.ResourceRequirements
		Lifecycle                  *corev1.Lifecycle
		Liveness, Readiness, Start *corev1.Probe
		Restart                    *corev1.ContainerRestartPolicy
		Stdin, StdinOnce, TTY      bool
	}
	cs := func(s *corev1.PodSpec) []c {
		var out []c
		for _, x := range append(slices.Clone(s.InitContainers), s.Containers...) {
			out = append(out, c{x.Name, x.Image, x.WorkingDir, x.Command, x.Args, x.Env, x.EnvFrom, x.VolumeMounts, x.VolumeDevices,
				x.Ports, x.SecurityContext, x.Resources, x.Lifecycle, x.LivenessProbe, x.ReadinessProbe, x.StartupProbe,
				x.RestartPolicy, x.Stdin, x.StdinOnce, x.TTY})
		}
		return out
	}
	type v struct {
		Name      string
		EmptyDir  *corev1.EmptyDirVolumeSource
		Projected *corev1.ProjectedVolumeSource
		Other     bool
	}
	vs := func(s *corev1.PodSpec) []v {
		var out []v
		for _, x := range s.Volumes {
			out = append(out, v{x.Name, x.EmptyDir, x.Projected, x.EmptyDir == nil && x.Projected == nil})
		}
		return out
	}
	pod0 := func(s *corev1.PodSpec) any {
		return []any{s.ServiceAccountName, s.AutomountServiceAccountToken, s.SecurityContext, s.RuntimeClassName,
			s.HostNetwork, s.HostPID, s.HostIPC, s.HostUsers, s.ShareProcessNamespace, s.NodeSelector, s.HostAliases,
			s.TerminationGracePeriodSeconds, s.ActiveDeadlineSeconds, s.RestartPolicy, s.DNSConfig, s.ResourceClaims}
	}
	switch {
	case specHash(cs(got)) != specHash(cs(tmpl)):
		return errors.New("its containers are not its template's (image, command, environment, mounts, security, resources, probes or hooks)")
	case specHash(vs(got)) != specHash(vs(tmpl)):
		return errors.New("its volumes are not its template's")
	case specHash(pod0(got)) != specHash(pod0(tmpl)):
		return errors.New("its service account, security context, runtime class, host namespaces, node selection, DNS or resource claims are not its template's")
	}
	return nil
}

// initDone reports whether every init container of pod ended with 0, never restarted.
func initDone(pod *corev1.Pod) bool {
	if len(pod.Status.InitContainerStatuses) != len(pod.Spec.InitContainers) {
		return false
	}
	for _, st := range pod.Status.InitContainerStatuses {
		if st.RestartCount != 0 || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			return false
		}
	}
	return true
}

// controlledBy reports whether refs name the controller of that kind, name and uid.
func controlledBy(refs []metav1.OwnerReference, kind, name string, uid types.UID) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return r.Kind == kind && r.Name == name && r.UID == uid
		}
	}
	return false
}

// deleteClaim deletes the claim of that uid in the foreground: its Sandbox and pod go first.
func (p *Provider) deleteClaim(name string, uid types.UID) error {
	return p.deleteClaimAs(name, uid, metav1.DeletePropagationForeground)
}

// deleteClaimAs deletes the claim of that uid with the given propagation.
func (p *Provider) deleteClaimAs(name string, uid types.UID, prop metav1.DeletionPropagation) error {
	if err := fenced(fmt.Sprintf("delete sandbox claim %q", name)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	err := p.client.ExtensionsV1beta1().SandboxClaims(p.ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptrTo(prop),
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete sandbox claim %q: %w", name, err)
	}
	return nil
}

// DeletePool deletes the pool's warm pool and template (the controller deletes its unclaimed
// Sandboxes) and its Secret. Its NetworkPolicy stays while any pod of the pool exists (a
// claimed one runs a dispatch it confines); [Provider.SweepPools] takes it later.
func (pl *Pool) Delete(ctx context.Context) error {
	p := pl.p
	// The pool's name hashes the home, the same on every replica: a new leader holds the very
	// pool this one made.
	if err := fenced("delete pool " + pl.Name); err != nil {
		return err
	}
	err := p.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Delete(ctx, pl.Name, metav1.DeleteOptions{
		PropagationPolicy: ptrTo(metav1.DeletePropagationBackground), Preconditions: &metav1.Preconditions{UID: &pl.tmplUID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pool %s: %w", pl.Name, err)
	}
	return nil
}

// Refresh deletes the Sandboxes the pool still holds whose pod ended or is gone (a worker that
// was refused by a restarted gateway exits, and the controller would hand the dead pod to the
// next claim, which agora refuses): the controller makes fresh ones. The holder calls it now
// and then; it returns how many it deleted.
func (pl *Pool) Refresh(ctx context.Context) (int, error) {
	p := pl.p
	l, err := p.client.AgentsV1beta1().Sandboxes(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("pool %s: list sandboxes: %w", pl.Name, err)
	}
	n := 0
	var errs []error
	for i := range l.Items {
		sb := &l.Items[i]
		ref, ok := controllerRef(sb.OwnerReferences)
		if !ok || ref.Kind != "SandboxWarmPool" || ref.Name != pl.Name || sb.DeletionTimestamp != nil {
			continue
		}
		pod, err := p.client.CoreV1().Pods(p.ns).Get(ctx, sb.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && time.Since(sb.CreationTimestamp.Time) < slotReadyWait {
			continue // its pod is not made yet
		}
		if err == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		if err := p.deleteSandboxAs(sb.Name, sb.UID, metav1.DeletePropagationBackground); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
