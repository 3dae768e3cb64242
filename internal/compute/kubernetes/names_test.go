package kubernetes

import (
	"testing"
)

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
