package config_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestTarget_Providers(t *testing.T) {
	img := "registry.example/team/toolchain:1.2" + digest
	worker := "localhost/agora-worker" + digest
	tests := []struct {
		name, file, wantErr string
		check               func(t *testing.T, c *config.Config)
	}{
		{name: "docker", file: "targets:\n  d: {provider: docker, image: " + img + ", runtime: runsc, resources: {cpu: 2, memory: 4Gi}}\n",
			check: func(t *testing.T, c *config.Config) {
				d, _ := c.Target("d")
				if d.Image != img || d.Runtime != "runsc" || d.Resources.CPU != "2" || d.Resources.Memory != "4Gi" {
					t.Errorf("docker target = %+v", d.Remote)
				}
			}},
		{name: "kubernetes takes gateway.advertise and a default ttl",
			file: "gateway: {listen: 0.0.0.0:8443, advertise: https://10.0.0.5:8443}\ntargets:\n  k: {provider: kubernetes, image: " + img +
				", worker_image: " + worker + ", namespace: agents, runtime_class: gvisor, node_selector: {pool: agents}}\n",
			check: func(t *testing.T, c *config.Config) {
				k, _ := c.Target("k")
				if k.Gateway != "https://10.0.0.5:8443" || k.TTLAfterFinished != config.DefaultTTLAfterFinished || k.NodeSelector["pool"] != "agents" {
					t.Errorf("kubernetes target = %+v", k.Remote)
				}
			}},
		{name: "tag refused", file: "targets:\n  d: {provider: docker, image: team/toolchain:latest}\n",
			wantErr: `targets.d.image: "team/toolchain:latest" is not pinned by digest`},
		{name: "short digest refused", file: "targets:\n  d: {provider: docker, image: team/toolchain@sha256:abc}\n", wantErr: "not pinned by digest"},
		{name: "image required", file: "targets:\n  d: {provider: docker}\n", wantErr: "targets.d.image: required for provider docker"},
		{name: "unknown provider", file: "targets:\n  d: {provider: nomad}\n", wantErr: `unknown provider "nomad"; want local, docker or kubernetes`},
		{name: "image on a local target", file: "targets:\n  l: {image: " + img + "}\n", wantErr: "targets.l.image: not a setting of provider local"},
		{name: "kubernetes setting on docker", file: "targets:\n  d: {provider: docker, image: " + img + ", namespace: x}\n",
			wantErr: "targets.d.namespace: not a setting of provider docker"},
		{name: "sandbox none on docker", file: "targets:\n  d: {provider: docker, image: " + img + ", sandbox: none}\n",
			wantErr: "sandbox: none is only for provider local"},
		{name: "network host on kubernetes", file: "gateway: {advertise: https://h:1}\ntargets:\n  k: {provider: kubernetes, image: " + img + ", worker_image: " + worker + ", namespace: a, network: host}\n",
			wantErr: "network: host is only for provider local"},
		{name: "runtime other than runsc", file: "targets:\n  d: {provider: docker, image: " + img + ", runtime: kata}\n", wantErr: `want "runsc"`},
		{name: "kubernetes needs a gateway", file: "targets:\n  k: {provider: kubernetes, image: " + img + ", worker_image: " + worker + ", namespace: a}\n",
			wantErr: "set gateway.advertise"},
		{name: "gateway must be https", file: "gateway: {advertise: http://h:80}\n", wantErr: "want https://HOST:PORT"},
		{name: "namespace required", file: "gateway: {advertise: https://h:1}\ntargets:\n  k: {provider: kubernetes, image: " + img + ", worker_image: " + worker + "}\n",
			wantErr: "targets.k.namespace: required"},
		{name: "namespace shape", file: "gateway: {advertise: https://h:1}\ntargets:\n  k: {provider: kubernetes, image: " + img + ", worker_image: " + worker + ", namespace: Agents_1}\n",
			wantErr: "want a Kubernetes namespace name"},
		{name: "kubernetes backend agent-sandbox",
			file: "gateway: {advertise: https://h:1}\ntargets:\n  k: {provider: kubernetes, image: " + img + ", worker_image: " + worker + ", namespace: a, backend: agent-sandbox}\n",
			check: func(t *testing.T, c *config.Config) {
				if k, _ := c.Target("k"); k.Backend != config.BackendAgentSandbox {
					t.Errorf("backend = %q, want agent-sandbox", k.Backend)
				}
			}},
		{name: "unknown kubernetes backend", file: "gateway: {advertise: https://h:1}\ntargets:\n  k: {provider: kubernetes, image: " + img + ", worker_image: " + worker + ", namespace: a, backend: Agent-Sandbox}\n",
			wantErr: `targets.k.backend: want "jobs" (the default) or "agent-sandbox", got "Agent-Sandbox"`},
		{name: "backend on docker", file: "targets:\n  d: {provider: docker, image: " + img + ", backend: agent-sandbox}\n",
			wantErr: "targets.d.backend: not a setting of provider docker"},
		{name: "bad quantity", file: "targets:\n  d: {provider: docker, image: " + img + ", resources: {cpu: lots}}\n", wantErr: "want a quantity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default("/h")
			err := config.Parse("agora.yaml", []byte(tt.file), c)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestPinnedImage(t *testing.T) {
	for ref, want := range map[string]bool{
		"a" + digest: true, "localhost/agora-worker" + digest: true, "r.io:5000/a/b:v1" + digest: true,
		"a": false, "a:latest": false, "a@sha256:" + strings.Repeat("A", 64): false, "@sha256:" + strings.Repeat("0", 64): false,
		"a" + digest + "\n": false, "a b" + digest: false,
	} {
		if got := config.PinnedImage(ref); got != want {
			t.Errorf("PinnedImage(%q) = %v, want %v", ref, got, want)
		}
	}
}
