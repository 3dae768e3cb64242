package kubernetes

import (
	"strings"
	"testing"
)

func TestObjectName(t *testing.T) {
	for _, c := range []struct{ id, want string }{
		{"01JABCDEFGHJKMNPQRSTVWXYZ0", "agora-01jabcdefghjkmnpqrstvwxyz0"},
		{"abc-1", "agora-abc-1"},
	} {
		if got := objectName(c.id); got != c.want {
			t.Errorf("objectName(%q) = %q, want %q", c.id, got, c.want)
		}
	}
	// Ids that would meet once lowercased or mapped keep apart through the hash.
	for _, pair := range [][2]string{{"aB", "ab"}, {"a_b", "a-b"}, {"a.b", "a-b"}, {strings.Repeat("A", 63), strings.Repeat("A", 62) + "B"}} {
		a, b := objectName(pair[0]), objectName(pair[1])
		if a == b {
			t.Errorf("objectName(%q) = objectName(%q) = %q", pair[0], pair[1], a)
		}
		for _, n := range []string{a, b} {
			if !isDNSLabel(n) {
				t.Errorf("objectName gave %q, not a DNS label", n)
			}
		}
	}
}

func TestTaskID(t *testing.T) {
	ns, name, err := parseTaskID(formatTaskID("agents", "agora-01jx"))
	if err != nil || ns != "agents" || name != "agora-01jx" {
		t.Fatalf("round trip = %q %q %v", ns, name, err)
	}
	for _, bad := range []string{"", "k8s:", "k8s:agents", "k8s:agents/", "k8s:/x", "local:1:2", "k8s:Agents/x",
		"k8s:agents/x/y", "k8s:agents/-x", "docker:abc", "k8s:agents/" + strings.Repeat("a", 64)} {
		if _, _, err := parseTaskID(bad); err == nil {
			t.Errorf("parseTaskID(%q) accepted", bad)
		}
	}
}

func TestCheckDispatchID(t *testing.T) {
	for _, ok := range []string{"01JABCDEFGHJKMNPQRSTVWXYZ0", "a", "a.b_c-d"} {
		if err := checkDispatchID(ok); err != nil {
			t.Errorf("checkDispatchID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "a b", "a/b", strings.Repeat("a", 64), "é"} {
		if err := checkDispatchID(bad); err == nil {
			t.Errorf("checkDispatchID(%q) accepted", bad)
		}
	}
}

func TestCheckImage(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab", 32)
	for _, ok := range []string{"busybox" + digest, "reg.example:5000/a/b:tag" + digest} {
		if err := checkImage("image", ok); err != nil {
			t.Errorf("checkImage(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"busybox", "busybox:latest", "busybox@sha256:abc", digest, "busybox@sha512:" + strings.Repeat("ab", 32),
		"busybox@sha256:" + strings.Repeat("AB", 32), "bu sybox" + digest, "a@b" + digest} {
		err := checkImage("image", bad)
		if err == nil {
			t.Errorf("checkImage(%q) accepted", bad)
		}
	}
	if err := checkImage("image", "busybox:1.36"); err == nil || !strings.Contains(err.Error(), "not pinned by digest; want REF@sha256:<64 hex>") {
		t.Errorf("tag error = %v", err)
	}
}

func TestParseGatewayURL(t *testing.T) {
	for _, ok := range []string{"https://10.0.0.1:8443", "https://10.0.0.1:8443/", "https://[fd00::1]:443", "https://gw.example:443", "https://agora-gw.agents.svc.cluster.local:8443"} {
		if _, err := parseGatewayURL(ok); err != nil {
			t.Errorf("parseGatewayURL(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "http://10.0.0.1:80", "https://gw:443", "https://GW.example:443", "https://-gw.example:443", "https://gw_1.example:443", "https://10.1:443", "https://10.0.0.1", "https://10.0.0.1:0",
		"https://u:p@10.0.0.1:1", "https://10.0.0.1:1/x", "https://10.0.0.1:1?q", "https://[fe80::1%25eth0]:1"} {
		if _, err := parseGatewayURL(bad); err == nil {
			t.Errorf("parseGatewayURL(%q) accepted", bad)
		}
	}
}

func TestNew_Refuses(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Options)
	}{
		{"tag", func(o *Options) { o.Image = "busybox:latest" }},
		{"worker tag", func(o *Options) { o.WorkerImage = "agora:dev" }},
		{"namespace", func(o *Options) { o.Namespace = "Agents" }},
		{"cpu", func(o *Options) { o.CPU = "two" }},
		{"memory", func(o *Options) { o.Memory = "-1Gi" }},
		{"no CA", func(o *Options) { o.GatewayCA = nil }},
		{"key as CA", func(o *Options) {
			o.GatewayCA = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		}},
		{"no exporter", func(o *Options) { o.Exporter = nil }},
		{"gateway name", func(o *Options) { o.GatewayURL = "https://agora.agents.svc:8443" }},
		{"runtime class", func(o *Options) { o.RuntimeClass = "G Visor" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := testOptions(t, &fakeExporter{})
			c.edit(&o)
			if _, err := New(o); err == nil {
				t.Errorf("New accepted %s", c.name)
			}
		})
	}
}
