package config_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestRedTeam47H_TargetKubeconfigIsAbsolute: a kubernetes target's client is built from its
// kubeconfig by the process that runs the dispatch: the CLI cold, in its own directory, or a
// resident or serve, in the directory it was started in. A relative kubeconfig would name
// another file, and so another cluster identity, for the same command cold and handed off
// (the hand-off compares no directory), so it is refused as leader.kubeconfig is.
func TestRedTeam47H_TargetKubeconfigIsAbsolute(t *testing.T) {
	img := "registry.example/team/toolchain:1.2" + digest
	worker := "localhost/agora-worker" + digest
	target := func(kubeconfig string) string {
		return "gateway: {advertise: https://h:1}\ntargets:\n  k: {provider: kubernetes, image: " + img + ", worker_image: " + worker +
			", namespace: a, kubeconfig: " + kubeconfig + "}\n"
	}
	for _, rel := range []string{"kube.yaml", "./kube.yaml", "../x/kube.yaml", "~/.kube/config"} {
		err := config.Parse("agora.yaml", []byte(target(rel)), config.Default("/h"))
		if err == nil || !strings.Contains(err.Error(), "targets.k.kubeconfig") {
			t.Errorf("kubeconfig %q: Parse = %v, want it refused", rel, err)
		}
	}
	if err := config.Parse("agora.yaml", []byte(target("/etc/agora/kubeconfig")), config.Default("/h")); err != nil {
		t.Errorf("an absolute kubeconfig: %v", err)
	}
}
