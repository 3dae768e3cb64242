package kubernetes

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func waiting(name, image, reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Image: image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

// pullFailure judges a pod by its containers' waiting reasons: a pull refusal of the init
// container is found first; a container only being created, or terminated, is none; and the
// kubelet's message reaches the error without a control character (a registry's error body
// is the kubelet's message, the registry's to shape) and cut to its limit.
func TestPullFailure(t *testing.T) {
	p := &Provider{ns: "agents", opts: Options{PullSecrets: []string{"regcred"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agora-x-abcde"}}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{waiting("fetch", "reg/w@sha256:1", "PodInitializing", "")}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("worker", "reg/t@sha256:2", "ContainerCreating", "")}
	if perr := p.pullFailure(pod); perr != nil {
		t.Fatalf("a pod being made: %v", perr)
	}
	pod.Status.ContainerStatuses[0] = waiting("worker", "reg/t@sha256:2", "ImagePullBackOff", "Back-off pulling image")
	pod.Status.InitContainerStatuses[0] = waiting("fetch", "reg/w@sha256:1", "ErrImagePull",
		"401 Unauthorized\n\x1b[2Jforged line\x00"+strings.Repeat("é", 600))
	perr := p.pullFailure(pod)
	if perr == nil || perr.Container != "fetch" || perr.Reason != "ErrImagePull" {
		t.Fatalf("pullFailure = %+v, want the init container's ErrImagePull", perr)
	}
	msg := perr.Error()
	for _, want := range []string{"pod agora-x-abcde could not pull image reg/w@sha256:1 (container fetch): ErrImagePull: 401 Unauthorized",
		"image_pull_secrets [regcred] exist in namespace agents"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q: %s", want, msg)
		}
	}
	if strings.ContainsAny(msg, "\n\x1b\x00") || !utf8.ValidString(msg) || len(perr.Message) > pullMessageLimit+3 {
		t.Errorf("the kubelet's message is not made printable and bounded (%d bytes): %q", len(perr.Message), perr.Message)
	}
	for _, reason := range []string{"InvalidImageName", "ErrImageNeverPull", "ImagePullBackOff"} {
		pod.Status.InitContainerStatuses[0] = waiting("fetch", "w", reason, "")
		pod.Status.ContainerStatuses = nil
		if perr := p.pullFailure(pod); perr == nil || perr.Reason != reason {
			t.Errorf("%s: pullFailure = %v", reason, perr)
		}
	}
	p.opts.PullSecrets = nil
	if msg := p.pullFailure(pod).Error(); !strings.Contains(msg, "the target has no image_pull_secrets") {
		t.Errorf("without pull secrets the error does not say so: %s", msg)
	}
}

// A pod that carries the Job's uid label but is not the Job's (whoever may create pods in the
// namespace made it) ends no dispatch, however it fails to pull; the Job's own pod does.
func TestJobPodPullFailure_ForgedLabel(t *testing.T) {
	h := &handle{p: &Provider{ns: "agents"}, uid: "job-uid"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged", Labels: map[string]string{"controller-uid": "job-uid"}}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("worker", "x", "ErrImagePull", "401 Unauthorized")}
	if perr := h.jobPodPullFailure(pod); perr != nil {
		t.Fatalf("a pod without the Job as its controller ended the dispatch: %v", perr)
	}
	yes := true
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "other", UID: "other-uid", Controller: &yes}}
	if perr := h.jobPodPullFailure(pod); perr != nil {
		t.Fatalf("another Job's pod ended the dispatch: %v", perr)
	}
	pod.OwnerReferences[0].UID = "job-uid"
	if perr := h.jobPodPullFailure(pod); perr == nil {
		t.Fatal("the Job's own pod's refused pull was not seen")
	}
}

// TestRedTeam36_PullMessageHidesNothing: a registry shapes the kubelet's pull message (its
// error text, a token realm's URL), so it can carry a right-to-left override, a line separator
// or a zero-width character, which printable let through (it replaced C0, DEL and C1 only):
// the dispatch's detail would read reordered in a terminal or an MCP client that does not
// escape it (the MCP server's scrub does not). Each is now a space, as a control character is.
func TestRedTeam36_PullMessageHidesNothing(t *testing.T) {
	p := &Provider{ns: "agents"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agora-x-abcde"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("worker", "reg/t@sha256:2", "ErrImagePull",
		"401 Unauthorized: realm https://reg.example/\u202etxt.terces\u202c\u2028forged: ok\u200b\U000e0041\u061c")}
	perr := p.pullFailure(pod)
	if perr == nil {
		t.Fatal("no pull failure")
	}
	for _, r := range perr.Error() {
		if agenttext.Hidden(r) || r == '\n' {
			t.Errorf("the dispatch's error keeps %U: %q", r, perr.Error())
		}
	}
	if !strings.Contains(perr.Message, "https://reg.example/ txt.terces  forged: ok") {
		t.Errorf("the message is not the kubelet's with its hidden characters made spaces: %q", perr.Message)
	}
}
