package doctor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestEngines: doctor asks each docker target's engine and each jobs-backend kubernetes
// target's cluster (not a local target, not an agent-sandbox one, which has its own check);
// an engine that does not answer is a required check missing, with the engine's error and a
// fix naming what to start or apply ("config ok" for a docker target whose socket did not
// exist).
func TestEngines(t *testing.T) {
	c := config.Default("")
	c.Targets["box"] = config.Target{Provider: config.ProviderDocker, Remote: config.Remote{DockerHost: "unix:///nonexistent.sock"}}
	c.Targets["pods"] = config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{Namespace: "agents"}}
	c.Targets["sb"] = config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{Namespace: "agents", Backend: config.BackendAgentSandbox}}
	var asked []string
	h := healthyRoot(nil)
	h.Engine = func(_ context.Context, t config.Target) (string, error) {
		asked = append(asked, t.Provider+"/"+t.Namespace+t.DockerHost)
		if t.Provider == config.ProviderDocker {
			return "", errors.New("dial unix /nonexistent.sock: connect: no such file or directory")
		}
		return "the API server answers", nil
	}
	rep := Run(t.Context(), h, Options{Config: c})
	if strings.Join(asked, ",") != "docker/unix:///nonexistent.sock,kubernetes/agents" {
		t.Errorf("asked %v, want the docker target then the jobs-backend kubernetes target", asked)
	}
	got := map[string]Check{}
	for _, ch := range rep.Checks {
		got[ch.Name] = ch
	}
	box := got["engine-box"]
	if box.Status != StatusMissing || !box.Required || !strings.Contains(box.Detail, "/nonexistent.sock") || !strings.Contains(box.Fix, "make podman") {
		t.Errorf("engine-box = %+v, want missing, required, naming the socket, the fix naming make podman", box)
	}
	if pods := got["engine-pods"]; pods.Status != StatusOK || !strings.Contains(pods.Detail, "target pods: the API server answers") {
		t.Errorf("engine-pods = %+v, want ok with the probe's answer", pods)
	}
	if _, ok := got["engine-sb"]; ok {
		t.Error("the agent-sandbox target got an engine check; it has its own")
	}
	if rep.CanDispatch {
		t.Error("CanDispatch with a docker target's engine missing; want false (the check is required)")
	}
}

// A kubernetes target with image_pull_secrets is told, when its probe fails, who makes them
// and where; one without is not sent looking for Secrets it does not name.
func TestEngineFix_PullSecrets(t *testing.T) {
	with := config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{Namespace: "agents", ImagePullSecrets: []string{"regcred"}}}
	if fix := engineFix(with); !strings.Contains(fix, "kubectl create secret docker-registry NAME -n agents") {
		t.Errorf("fix = %q", fix)
	}
	with.ImagePullSecrets = nil
	if fix := engineFix(with); strings.Contains(fix, "image_pull_secrets") {
		t.Errorf("fix of a target without pull secrets = %q", fix)
	}
}
