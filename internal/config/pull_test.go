package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// k8sPullFile is a kubernetes target whose pull settings start on line 9.
func k8sPullFile(pull string) string {
	return "gateway: {advertise: https://h:1}\n" +
		"targets:\n" +
		"  k:\n" +
		"    provider: kubernetes\n" +
		"    image: registry.example/team/toolchain" + digest + "\n" +
		"    worker_image: localhost/agora-worker" + digest + "\n" +
		"    namespace: agents\n" +
		"    backend: jobs\n" +
		pull
}

func TestTarget_ImagePull(t *testing.T) {
	c := config.Default("/h")
	if err := config.Parse("agora.yaml", []byte(k8sPullFile("    image_pull_secrets: [regcred, mirror.example.com]\n    image_pull_policy: Always\n")), c); err != nil {
		t.Fatal(err)
	}
	k, _ := c.Target("k")
	if strings.Join(k.ImagePullSecrets, ",") != "regcred,mirror.example.com" || k.ImagePullPolicy != "Always" {
		t.Errorf("pull settings = %v, %q", k.ImagePullSecrets, k.ImagePullPolicy)
	}
	var many strings.Builder
	many.WriteString("    image_pull_secrets:\n")
	for i := range 10_000 {
		fmt.Fprintf(&many, "    - cred-%d\n", i)
	}
	for name, tt := range map[string]struct{ pull, want string }{
		// The attacks: a path, control characters, ten thousand names, one twice, and the
		// Secret agora itself makes for a dispatch (its token and egress proxy password).
		"path": {"    image_pull_secrets:\n    - regcred\n    - ../kube-system/regcred\n",
			`agora.yaml:11: targets.k.image_pull_secrets[1]: want the name of a Secret`},
		"control": {"    image_pull_secrets: [\"reg\\ncred\", \"a\\u0000b\"]\n",
			`agora.yaml:9: targets.k.image_pull_secrets[0]: want the name of a Secret in the target's namespace (lowercase letters, digits, '-' and '.', at most 253), got "reg\ncred"`},
		"ten thousand": {many.String(), "agora.yaml:9: targets.k.image_pull_secrets: 10000 names; at most 16"},
		"twice": {"    image_pull_secrets:\n    - regcred\n    - mirror\n    - regcred\n",
			`agora.yaml:12: targets.k.image_pull_secrets[2]: "regcred" is listed twice`},
		"agora's own": {"    image_pull_secrets: [agora-01jabcdefghjkmnpqrstvwxyz0]\n",
			"agora.yaml:9: targets.k.image_pull_secrets[0]: \"agora-01jabcdefghjkmnpqrstvwxyz0\": names starting agora- are agora's own Secrets"},
		"policy": {"    image_pull_policy: always\n",
			`agora.yaml:9: targets.k.image_pull_policy: want IfNotPresent (the default), Always or Never, got "always"`},
	} {
		err := config.Parse("agora.yaml", []byte(k8sPullFile(tt.pull)), config.Default("/h"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse = %v, want %q", name, err, tt.want)
		}
		if err != nil && len(err.Error()) > 2000 {
			t.Errorf("%s: the error is %d bytes", name, len(err.Error()))
		}
	}
	docker := "targets:\n  d: {provider: docker, image: registry.example/t" + digest + ", image_pull_secrets: [regcred]}\n"
	if err := config.Parse("agora.yaml", []byte(docker), config.Default("/h")); err == nil ||
		!strings.Contains(err.Error(), "targets.d.image_pull_secrets: not a setting of provider docker") {
		t.Errorf("pull secrets on a docker target: %v", err)
	}
}
