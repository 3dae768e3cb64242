package selftest_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestSelftest_KubernetesCorpus runs the corpus (providerSlice) on a `provider: kubernetes` target
// whose pods run on the real kubelet the tests start (internal/k8stest Options.RealNode), in
// the container tests' toolchain image with agora's worker image made from the worker program
// under test. The throw-away home serves its own network gateway on the node's address. As on
// docker, no attack may be seen allowed, and the only rows that may fail are those whose tool
// the image lacks or whose control the node does not enforce (the disk quota: the pod's
// record says disk-unenforced).
func TestSelftest_KubernetesCorpus(t *testing.T) {
	needTools(t)
	toolchain := os.Getenv("AGORA_TOOLCHAIN_IMAGE")
	if toolchain == "" {
		t.Skip("SKIP: AGORA_TOOLCHAIN_IMAGE unset: export the line scripts/images.sh toolchain prints (the pods' image)")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("SKIP: podman is missing (it saves the toolchain image for containerd): run scripts/podman.sh")
	}
	bin := agoraBin(t)
	c := k8stest.Start(t, k8stest.Options{RealNode: true})
	worker, err := c.ImportAgoraWorker(t.Context(), agoratest.Worker(bin))
	if err != nil {
		t.Fatal(err)
	}
	image, err := c.ImportPodmanImage(t.Context(), toolchain)
	if err != nil {
		t.Fatal(err)
	}
	gw := net.JoinHostPort(k8stest.RealNodeIP, "8443")
	yml := fmt.Sprintf(`gateway:
  listen: %s
  advertise: https://%s
targets:
  pod:
    provider: kubernetes
    kubeconfig: %s
    namespace: %s
    image: %s
    worker_image: %s
`, gw, gw, c.Kubeconfig, c.Namespace, image, worker)
	_, res, code := runSelftest(t, yml, append([]string{"--target", "pod"}, providerSlice(t, "kubernetes")...)...)
	rep := res.Reports[0]
	logTimes(t, rep)
	checkContained(t, rep, nil)
	if code != 0 && rep.Failed == 0 {
		t.Errorf("exit %d with no failed row", code)
	}
}
