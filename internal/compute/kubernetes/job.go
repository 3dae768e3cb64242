package kubernetes

import (
	"cmp"
	"math"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// The pod's layout that the provider owns.
const (
	// binDir holds agora's static worker program in the worker's container, copied there by
	// the init container from the worker image: the target's image needs no agora of its own.
	binDir    = "/agora/bin"
	workerBin = binDir + "/agora-worker"
	// stageDir is where the init container sees the volumes ($AGORA_STAGE/NAME).
	stageDir = "/agora/stage"
	tmpDir   = "/tmp"

	binVolume = "bin"
	tmpVolume = "tmp"
	// mountVolumePrefix prefixes a mount's volume name, so no mount name meets bin or tmp.
	mountVolumePrefix = "m-"

	fetchContainer  = "fetch"
	workerContainer = "worker"
)

// Sizes of the provider's own volumes when the spec sets none.
const (
	binVolumeSize  = 512 << 20
	defaultScratch = 1 << 30
)

// jobInput is everything a Job is built from.
type jobInput struct {
	name, id string
	spec     compute.Spec
	env      []envVar
	mounts   []remote.Mount
	// gateway is the gateway resolved for this Job, as its NetworkPolicy admits it.
	gateway gatewayAddr
}

// jobObject builds the dispatch's Job. It holds no secret: every environment value comes from
// the Secret named like the Job.
func (p *Provider) jobObject(in jobInput) *batchv1.Job {
	uid, gid := p.podUser(in.spec)
	scratch := in.spec.Limits.Scratch
	if scratch <= 0 {
		scratch = defaultScratch
	}
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		// The Job owns the NetworkPolicy, so deleting the Job (cancel) deletes the policy at
		// once: a grace period would leave the agent running without it (the worker ignores
		// SIGTERM). No grace: the pod is killed as the policy goes.
		TerminationGracePeriodSeconds: ptrTo(int64(0)),
		AutomountServiceAccountToken:  ptrTo(false),
		EnableServiceLinks:            ptrTo(false),
		NodeSelector:                  p.opts.NodeSelector,
		HostAliases:                   in.gateway.hostAliases(),
		ImagePullSecrets:              p.pullSecrets(),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptrTo(true),
			RunAsUser:      &uid,
			RunAsGroup:     &gid,
			FSGroup:        &gid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes: []corev1.Volume{
			emptyDir(binVolume, binVolumeSize, ""),
			// In memory, so its pages count against the pod's memory limit, as the local
			// sandbox's tmpfs does.
			emptyDir(tmpVolume, scratch, corev1.StorageMediumMemory),
		},
	}
	if p.opts.RuntimeClass != "" {
		pod.RuntimeClassName = ptrTo(p.opts.RuntimeClass)
	}
	res := p.resources(in.spec.Limits)
	// fetch names its routes by the dispatch id; the spec's environment, which carries it,
	// is the worker's container's only.
	fetchEnv := append(p.remoteEnv(in.name), corev1.EnvVar{Name: remote.StageEnv, Value: stageDir},
		corev1.EnvVar{Name: remote.DispatchEnv, Value: in.id})
	fetch := corev1.Container{
		Name:            fetchContainer,
		Image:           p.opts.WorkerImage,
		Command:         []string{workerBin, "worker", "fetch"},
		Env:             fetchEnv,
		VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: stageDir + "/" + binVolume}},
		Resources:       res,
		SecurityContext: containerSecurity(),
		ImagePullPolicy: p.pullPolicy(),
	}
	dir := cmp.Or(in.spec.Dir, "/")
	worker := corev1.Container{
		Name:       workerContainer,
		Image:      p.opts.Image,
		Command:    append([]string{workerBin}, in.spec.Argv[1:]...),
		WorkingDir: dir,
		Env: append(append(secretEnv(in.name, in.env), corev1.EnvVar{Name: "PWD", Value: dir}, rlimitsEnv(in.spec.Limits)),
			p.remoteEnv(in.name)...),
		VolumeMounts: []corev1.VolumeMount{
			{Name: binVolume, MountPath: binDir, ReadOnly: true},
			{Name: tmpVolume, MountPath: tmpDir},
		},
		Resources:       res,
		SecurityContext: containerSecurity(),
		ImagePullPolicy: p.pullPolicy(),
	}
	for _, m := range in.mounts {
		vol := mountVolumePrefix + m.Name
		pod.Volumes = append(pod.Volumes, emptyDir(vol, scratch, ""))
		fetch.VolumeMounts = append(fetch.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: stageDir + "/" + m.Name})
		vm := corev1.VolumeMount{Name: vol, MountPath: m.Dst,
			// The worker creates its listening sockets in a Sockets mount.
			ReadOnly: !m.Writable && len(m.Sockets) == 0}
		if m.File {
			vm.SubPath = remote.FileName
		}
		worker.VolumeMounts = append(worker.VolumeMounts, vm)
	}
	pod.InitContainers = []corev1.Container{fetch}
	pod.Containers = []corev1.Container{worker}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: in.name, Namespace: p.ns, Labels: labels(in.id)},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptrTo(int32(0)),
			TTLSecondsAfterFinished: ptrTo(int32(min(p.opts.TTL.Seconds(), math.MaxInt32))),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(in.id)},
				Spec:       pod,
			},
		},
	}
	if p.testOnlyPodMeta != nil {
		p.testOnlyPodMeta(&job.Spec.Template.ObjectMeta)
	}
	if t := in.spec.Limits.Timeout; t > 0 {
		job.Spec.ActiveDeadlineSeconds = ptrTo(int64((t + time.Second - 1) / time.Second))
	}
	return job
}

// resources sets requests equal to limits (the Guaranteed class: the pod is the last to be
// evicted and gets the CPU it asked for). Memory falls back to the spec's limit.
func (p *Provider) resources(l compute.Limits) corev1.ResourceRequirements {
	rl := corev1.ResourceList{}
	if p.cpu != nil {
		rl[corev1.ResourceCPU] = *p.cpu
	}
	switch {
	case p.mem != nil:
		rl[corev1.ResourceMemory] = *p.mem
	case l.Memory > 0:
		rl[corev1.ResourceMemory] = *resource.NewQuantity(l.Memory, resource.BinarySI)
	}
	if len(rl) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
}

// remoteEnv is how both containers reach the gateway: its URL in the clear, its CA and the
// token from the Secret.
func (p *Provider) remoteEnv(secret string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: remote.GatewayURLEnv, Value: p.opts.GatewayURL},
		secretRef(remote.CAEnv, secret, secretCA),
		secretRef(remote.TokenEnv, secret, secretToken),
	}
}

// secretEnv names the spec's environment; the values stay in the Secret.
func secretEnv(secret string, env []envVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env)+4)
	for _, e := range env {
		out = append(out, secretRef(e.name, secret, secretEnvPrefix+e.name))
	}
	return out
}

func secretRef(env, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key, Optional: ptrTo(false),
	}}}
}

// containerSecurity is every container's context: what Pod Security "restricted" demands, and
// a read-only root file system.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptrTo(true),
		ReadOnlyRootFilesystem:   ptrTo(true),
		AllowPrivilegeEscalation: ptrTo(false),
		Privileged:               ptrTo(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func emptyDir(name string, size int64, medium corev1.StorageMedium) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: medium, SizeLimit: resource.NewQuantity(size, resource.BinarySI),
	}}}
}
