package cli

import (
	"errors"
	"slices"
	"testing"
)

func TestNewFdpassCmd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		argv  []string
		usage bool
	}{
		{name: "program", args: []string{"--", "/agora/bin/agora-worker", "worker"}, argv: []string{"/agora/bin/agora-worker", "worker"}},
		{name: "flagslike", args: []string{"--", "sh", "-c", "--help"}, argv: []string{"sh", "-c", "--help"}},
		{name: "nodashes", args: []string{"/agora/bin/agora-worker", "worker"}, usage: true},
		{name: "noprogram", args: []string{"--"}, usage: true},
		{name: "none", args: nil, usage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *fdpassOptions
			cmd := newFdpassCmd(func(o *fdpassOptions) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			err := cmd.Execute()
			var ue *usageError
			if tc.usage {
				if !errors.As(err, &ue) {
					t.Fatalf("err %v, want a usage error", err)
				}
				return
			}
			if err != nil || got == nil || !slices.Equal(got.argv, tc.argv) {
				t.Fatalf("err %v, argv %v, want %v", err, got, tc.argv)
			}
		})
	}
}
