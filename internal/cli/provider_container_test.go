package cli

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

func TestDockerCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   config.Quantity
		want float64
		bad  bool
	}{
		{in: "", want: 0},
		{in: "2", want: 2},
		{in: "1.5", want: 1.5},
		{in: "500m", want: 0.5},
		{in: "0", bad: true},
		{in: "2Gi", bad: true},
		{in: "1k", bad: true},
		{in: "m", bad: true},
	} {
		got, err := dockerCPUs(tc.in)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("dockerCPUs(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestNewContainerProvider_Refuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    config.Target
		want string
	}{
		{name: "tag", t: config.Target{Remote: config.Remote{Image: "busybox:latest"}}, want: "not pinned by digest"},
		{name: "memory", t: config.Target{Remote: config.Remote{Image: "x@sha256:" + strings.Repeat("a", 64), Resources: config.Resources{Memory: "4Gi"}}}, want: "resources.memory"},
		{name: "cpu", t: config.Target{Remote: config.Remote{Image: "x@sha256:" + strings.Repeat("a", 64), Resources: config.Resources{CPU: "2Gi"}}}, want: "resources.cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newContainerProvider(t.Context(), tc.t)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}
