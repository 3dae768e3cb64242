package gateway

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

func TestNewGatewayServeCmd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		want      gatewayServeOptions
		wantUsage bool
	}{
		{name: "flags", args: []string{"--listen", "0.0.0.0:8443", "--advertise", "https://10.0.0.5:8443"},
			want: gatewayServeOptions{listen: "0.0.0.0:8443", advertise: "https://10.0.0.5:8443"}},
		{name: "from agora.yaml", args: nil, want: gatewayServeOptions{}},
		{name: "http advertise", args: []string{"--advertise", "http://10.0.0.5:8443"}, wantUsage: true},
		{name: "advertise without port", args: []string{"--advertise", "https://gw.example"}, wantUsage: true},
		{name: "advertise with a path", args: []string{"--advertise", "https://gw.example:1/x"}, wantUsage: true},
		{name: "an argument", args: []string{"extra"}, wantUsage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, func(string) string { return "" })
			var got *gatewayServeOptions
			cmd := newGatewayServeCmd(f, func(o *gatewayServeOptions) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tc.wantUsage {
				if err == nil || got != nil {
					t.Fatalf("got options %+v, err %v; want a usage error", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.listen != tc.want.listen || got.advertise != tc.want.advertise {
				t.Errorf("got listen %q advertise %q, want %q %q", got.listen, got.advertise, tc.want.listen, tc.want.advertise)
			}
		})
	}
}
