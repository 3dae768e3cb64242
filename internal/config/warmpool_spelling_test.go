package config_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// Attack (warm_pool: false spelled otherwise): every way agora.yaml can say false beside
// warm: N on a kubernetes target is refused with both keys named, never read as unset (which
// would keep the pool warm_pool said to keep off), in YAML and in the JSON that agora.yaml may
// also be written in; a quoted "false" is read as false too. A spelling the parser does not
// read as a bool (YAML 1.1's no, off and n, False, 0) is refused as no bool; an anchor as an
// anchor. Only null or no value at all is unset, and then warm: N implies the pool.
func TestTarget_WarmPoolFalseSpellings(t *testing.T) {
	sandbox := func(extra string) string {
		return strings.Replace(k8sPullFile("    warm: 2\n"+extra), "backend: jobs", "backend: agent-sandbox", 1)
	}
	for _, tt := range []struct {
		name, doc, want string
	}{
		{"false", sandbox("    warm_pool: false\n"), "warm_pool: false, with warm: 2"},
		{"False", sandbox("    warm_pool: False\n"), "warm_pool: want true or false, got \"False\""},
		{"FALSE", sandbox("    warm_pool: FALSE\n"), "warm_pool: want true or false, got \"FALSE\""},
		{"tagged", sandbox("    warm_pool: !!bool false\n"), "warm_pool: false, with warm: 2"},
		{"flow", sandbox("    warm_pool: {}\n"), "warm_pool: want true or false, got a mapping"},
		{"quoted", sandbox("    warm_pool: \"false\"\n"), "warm_pool: false, with warm: 2"},
		{"single quoted", sandbox("    warm_pool: 'false'\n"), "warm_pool: false, with warm: 2"},
		{"no", sandbox("    warm_pool: no\n"), "warm_pool: want true or false, got \"no\""},
		{"off", sandbox("    warm_pool: off\n"), "warm_pool: want true or false, got \"off\""},
		{"n", sandbox("    warm_pool: n\n"), "warm_pool: want true or false, got \"n\""},
		{"0", sandbox("    warm_pool: 0\n"), "warm_pool: want true or false, got \"0\""},
		{"null", sandbox("    warm_pool: null\n"), ""},
		{"empty", sandbox("    warm_pool:\n"), ""},
		{"anchor", sandbox("    warm_pool: &f false\n"), "warm_pool: anchors and aliases are not allowed"},
		{"json", `{"gateway": {"advertise": "https://h:1"}, "targets": {"k": {"provider": "kubernetes", ` +
			`"image": "registry.example/team/toolchain` + digest + `", "worker_image": "localhost/agora-worker` + digest + `", ` +
			`"namespace": "agents", "backend": "agent-sandbox", "warm": 2, "warm_pool": false}}}`, "warm_pool: false, with warm: 2"},
		{"json, quoted", `{"gateway": {"advertise": "https://h:1"}, "targets": {"k": {"provider": "kubernetes", ` +
			`"image": "registry.example/team/toolchain` + digest + `", "worker_image": "localhost/agora-worker` + digest + `", ` +
			`"namespace": "agents", "backend": "agent-sandbox", "warm": 2, "warm_pool": "false"}}}`, "warm_pool: false, with warm: 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default("/h")
			err := config.Parse("agora.yaml", []byte(tt.doc), c)
			if tt.want == "" {
				// null and an empty value are unset: warm: 2 implies the pool.
				if err != nil {
					t.Fatalf("Parse = %v, want nil", err)
				}
				if k, _ := c.Target("k"); !k.KeepsPool() {
					t.Errorf("warm_pool %s with warm: 2 keeps no pool: want it implied", tt.name)
				}
				return
			}
			if err == nil {
				k, _ := c.Target("k")
				t.Fatalf("Parse = nil (keeps pool %v), want an error naming %q", k.KeepsPool(), tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want %q", err, tt.want)
			}
			if strings.HasPrefix(tt.want, "warm_pool: false") && !strings.Contains(err.Error(), "warm: 2") {
				t.Errorf("Parse = %v: want both keys named", err)
			}
		})
	}
}
