package kubernetes

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// A slot's read-only places: read-only for real, as a cold pod's. Files a slot's worker
// fetched into its writable /agora at the claim, write bits taken off, would be read-only by
// mode only: the agent, the files' owner, could chmod them back and write. So the slot's pod
// has, at each place its template knows ([PoolOptions.Places]):
//
//   - an emptyDir of its own (p-INDEX), mounted read-only in the worker's container at the
//     place (a file place as its "file" entry, a subPath mount, as a cold pod's), so nothing
//     of the worker's container can write there, the agent's processes included;
//   - the init step makes a file place's entry, and the mount points of the places nested in a
//     directory place, before any container starts (the kubelet would make a directory where a
//     subPath entry is missing, and no runtime can make a mount point in a read-only mount);
//   - the filler, a second container of agora's worker image (fillContainer), holds those
//     volumes writable. It has no token: at the claim the worker hands it the grant over a
//     Unix socket in a volume of the filler's (read-only in the worker's container); it
//     fetches the read-only mounts into the places, answers and exits, and the worker fetches
//     the rest. It shares no process namespace with the worker, runs agora's binary alone and
//     the pod's NetworkPolicy is its own: it reaches the gateway and nothing else.
//
// The claim refuses a dispatch whose read-only mounts are not exactly the slot's places
// (remote.MatchSlotPlaces), before the bind: the slot is deleted, the dispatch starts cold.

const (
	fillContainer = "fill"
	// fillVolume holds the filler's socket; fillDir is where both containers see it (the
	// worker's read-only), below the worker's own /agora.
	fillVolume = "fill"
	fillDir    = slotRoot + "/fill"
	fillSocket = fillDir + "/fill.sock"
	// fillVolumeSize bounds the socket's volume (nothing else is written there).
	fillVolumeSize = 1 << 20
)

// The filler's resources: it streams tar archives to disk, so a little memory and CPU. They
// are its own, added to the pod's, so the worker's container keeps the cold one's limits.
var (
	fillCPU    = resource.MustParse("100m")
	fillMemory = resource.MustParse("128Mi")
)

// placeVolume is place i's volume name (and its directory in the stage).
func placeVolume(i int) string { return remote.SlotPlaceVolumePrefix + strconv.Itoa(i) }

// addSlotPlaces gives the slot's pod its places: their volumes, the init step's writable
// mounts of them (it makes the entries and mount points), the worker's read-only ones and the
// filler with the writable side.
func (p *Provider) addSlotPlaces(pod *corev1.PodSpec, places []remote.SlotPlace, scratch int64, secret string) {
	enc, _ := json.Marshal(places)
	if places == nil {
		enc = []byte("[]")
	}
	fetch, w := &pod.InitContainers[0], &pod.Containers[0]
	fetch.Env = append(fetch.Env, corev1.EnvVar{Name: remote.SlotPlacesEnv, Value: string(enc)})
	var stage []corev1.VolumeMount
	for i, pl := range places {
		vol := placeVolume(i)
		pod.Volumes = append(pod.Volumes, emptyDir(vol, scratch, ""))
		stage = append(stage, corev1.VolumeMount{Name: vol, MountPath: stageDir + "/" + vol})
		vm := corev1.VolumeMount{Name: vol, MountPath: pl.Dst, ReadOnly: true}
		if pl.File {
			vm.SubPath = remote.FileName
		}
		w.VolumeMounts = append(w.VolumeMounts, vm)
	}
	fetch.VolumeMounts = append(fetch.VolumeMounts, stage...)
	pod.Volumes = append(pod.Volumes, emptyDir(fillVolume, fillVolumeSize, ""))
	w.VolumeMounts = append(w.VolumeMounts, corev1.VolumeMount{Name: fillVolume, MountPath: fillDir, ReadOnly: true})
	w.Env = append(w.Env, corev1.EnvVar{Name: remote.SlotFillEnv, Value: fillSocket})
	fill := corev1.Container{
		Name:    fillContainer,
		Image:   p.opts.WorkerImage,
		Command: []string{workerBin, "worker", "fill"},
		// No token: the grant comes from the worker at the claim. The CA and URL reach the
		// gateway, which the pod's NetworkPolicy admits for every container alike.
		Env: []corev1.EnvVar{
			{Name: remote.GatewayURLEnv, Value: p.opts.GatewayURL},
			secretRef(remote.CAEnv, secret, secretCA),
			{Name: remote.StageEnv, Value: stageDir},
			{Name: remote.SlotPlacesEnv, Value: string(enc)},
			{Name: remote.SlotFillEnv, Value: fillSocket},
		},
		VolumeMounts:    append(stage, corev1.VolumeMount{Name: fillVolume, MountPath: fillDir}),
		Resources:       fillResources(w.Resources),
		SecurityContext: containerSecurity(),
		ImagePullPolicy: p.pullPolicy(),
	}
	pod.Containers = append(pod.Containers, fill)
}

// fillResources are the filler's: the kinds the worker's container sets (requests equal to
// limits keeps a Guaranteed pod Guaranteed), each at the filler's small size.
func fillResources(w corev1.ResourceRequirements) corev1.ResourceRequirements {
	rl := corev1.ResourceList{}
	if _, ok := w.Limits[corev1.ResourceCPU]; ok {
		rl[corev1.ResourceCPU] = fillCPU
	}
	if _, ok := w.Limits[corev1.ResourceMemory]; ok {
		rl[corev1.ResourceMemory] = fillMemory
	}
	if len(rl) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
}

// checkSlotMounts wants every mount valid, the read-only ones exactly the slot's places, and
// every other one below /agora, where the slot's worker fetches.
func checkSlotMounts(ms []remote.Mount, places []remote.SlotPlace) error {
	if err := checkMounts(ms); err != nil {
		return err
	}
	if _, err := remote.MatchSlotPlaces(places, ms); err != nil {
		return err
	}
	for _, m := range ms {
		if !remote.ReadOnlyMount(m) && !strings.HasPrefix(m.Dst, slotRoot+"/") {
			return fmt.Errorf("mount %q at %s is outside %s, where a warm slot fetches", m.Name, m.Dst, slotRoot)
		}
		if m.Dst == fillDir || strings.HasPrefix(m.Dst, fillDir+"/") {
			return fmt.Errorf("mount %q at %s is the slot's filler's place", m.Name, m.Dst)
		}
	}
	return nil
}

// fillerWaits reports whether the pod's filler is running, not ended, and no container of the
// pod ever restarted: a filler gone before the claim would leave the worker with no one to fill
// its places. The pod's restartPolicy is Never, yet the kubelet restarts a container whose spec
// changed: a tenant who sets the filler's (or the worker's) image to theirs and back runs their
// image with the places' writable side (or the slot's token) while the pod as stored is agora's
// again, its containers' hash the same. The restart count is what is left of it.
func fillerWaits(pod *corev1.Pod) bool {
	for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if st.RestartCount != 0 || st.Name == fillContainer && st.State.Terminated != nil {
			return false
		}
	}
	return true // the filler not reported yet: running pods report both containers
}

// checkPlaces wants places a slot's pod can mount: valid (remote.CheckSlotPlaces), none at or
// above the slot's own /agora, worker binary, filler socket or /tmp, and a place outside /agora
// a file (the system trust store): a directory mounted over the image's would hide its files.
func checkPlaces(places []remote.SlotPlace, argv []string) error {
	if err := remote.CheckSlotPlaces(places); err != nil {
		return err
	}
	own := []string{slotRoot, binDir, fillDir, tmpDir}
	if len(argv) > 0 {
		own = append(own, argv[0])
	}
	for _, pl := range places {
		for _, o := range own {
			if pl.Dst == o || strings.HasPrefix(o, pl.Dst+"/") || strings.HasPrefix(pl.Dst, o+"/") && o != slotRoot {
				return fmt.Errorf("slot place %s: at or around the slot's own %s", pl.Dst, o)
			}
		}
		if !strings.HasPrefix(pl.Dst, slotRoot+"/") && !pl.File {
			return fmt.Errorf("slot place %s: outside %s, a place must be a file", pl.Dst, slotRoot)
		}
	}
	return nil
}

// Places are the read-only places of a pool pod of tmpl ([PoolOptions.Places]): the
// binds a docker slot stages (stagedBind: read-only, below the layout root, not the worker
// binary nor the gateway's socket directory, and the system trust store of a dispatch with the
// egress proxy), each a file or a directory as placeIsFile says. The pod mounts each
// read-only; its filler fills them at the claim, the trust store with the
// claiming dispatch's stage's trust file, so a proxy dispatch runs warm.
func Places(tmpl compute.Spec) []remote.SlotPlace {
	var out []remote.SlotPlace
	for _, b := range tmpl.Binds {
		if stagedBind(b) {
			out = append(out, remote.SlotPlace{Dst: b.Dst, File: placeIsFile(b)})
		}
	}
	return out
}

// stagedBind says whether a template bind is a read-only place of a pool pod: read-only,
// below the layout root, neither the pod's own worker binary nor the gateway's socket
// directory (the worker listens there, so it is a directory it writes); and the system trust
// store of a dispatch with the egress proxy (wire.SystemTrustFile, its stage's trust file bound
// over the image's), though outside the layout root. A docker slot's places follow the same
// rule (compute/container/slots).
func stagedBind(b compute.Bind) bool {
	if b.Writable || b.Result {
		return false
	}
	return b.Dst == wire.SystemTrustFile ||
		strings.HasPrefix(b.Dst, wire.DefaultRoot+"/") && b.Dst != wire.BinPath && b.Dst != wire.GatewayPath
}

// placeIsFile says whether the template's bind b is a file: by its source when it still
// stands, else by its place (a bundle's manifest and a runtime binary are files).
func placeIsFile(b compute.Bind) bool {
	if fi, err := os.Stat(b.Src); err == nil {
		return fi.Mode().IsRegular()
	}
	return b.Dst == wire.BundlePath+"/"+wire.ManifestFile || b.Dst == wire.SystemTrustFile || strings.HasPrefix(b.Dst, wire.RuntimeBinDir+"/")
}
