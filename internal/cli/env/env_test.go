package env

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestNewEnvRegisterCmd_Bindings maps --bind-host and --bind-header to the options' bindings
// (stopping after parsing: nothing is registered).
func TestNewEnvRegisterCmd_Bindings(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    map[string]catalog.Binding
		wantErr string
	}{
		{name: "none", args: []string{"--secret", "A=env:S"}},
		{name: "named", args: []string{"--secret", "A=env:S", "--secret", "B=env:S",
			"--bind-host", "A=api.example.com, example.com", "--bind-host", "B=*.example.org", "--bind-host", "A=192.0.2.1",
			"--bind-header", "A=x-api-key,Private-Token"},
			want: map[string]catalog.Binding{
				"A": {Hosts: []string{"api.example.com", "example.com", "192.0.2.1"}, Headers: []string{"X-Api-Key", "Private-Token"}},
				"B": {Hosts: []string{"*.example.org"}},
			}},
		{name: "one secret, key left out", args: []string{"--secret", "A=env:S", "--bind-host", "a.example", "--bind-header", "X-Key"},
			want: map[string]catalog.Binding{"A": {Hosts: []string{"a.example"}, Headers: []string{"X-Key"}}}},
		{name: "unknown key", args: []string{"--secret", "A=env:S", "--bind-host", "B=a.example"},
			wantErr: "--bind-host B: B is not a --secret of this command (secrets: A)"},
		{name: "no secrets", args: []string{"--bind-host", "a.example"},
			wantErr: "KEY= may be left out only with exactly one --secret (this command has 0)"},
		{name: "value", args: []string{"--value", "V=1", "--secret", "A=env:S", "--bind-host", "V=a.example"},
			wantErr: "V is a --value, not a --secret"},
		{name: "bad host", args: []string{"--secret", "A=env:S", "--bind-host", "A=a.example/x"},
			wantErr: `--bind-host A: host "a.example/x"`},
		{name: "empty hosts", args: []string{"--secret", "A=env:S", "--bind-host", "A=, "},
			wantErr: "--bind-host A: nothing after A="},
		{name: "header without host", args: []string{"--secret", "A=env:S", "--bind-header", "X-Key"},
			wantErr: "--bind-header A: A is bound to no host"},
		{name: "bad header", args: []string{"--secret", "A=env:S", "--bind-host", "a.example", "--bind-header", "Content-Length"},
			wantErr: `header "Content-Length" cannot be bound`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}},
				func(k string) string { return map[string]string{"S": "secret-value-0123"}[k] })
			var got *envRegisterOptions
			cmd := newEnvRegisterCmd(f, func(o *envRegisterOptions) error { got = o; return nil })
			cmd.SetArgs(append([]string{"e"}, tt.args...))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tt.wantErr != "" {
				if _, usage := err.(*cmdutil.UsageError); !usage || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Execute = %v (%T), want a usage error containing %q", err, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret-value") {
					t.Errorf("error %q holds the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.bindings); diff != "" {
				t.Errorf("bindings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
