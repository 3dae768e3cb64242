package doctorcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/doctor"
)

func TestNewDoctorCmd(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantOutput string
		wantErr    string
	}{
		{name: "default", args: nil, wantOutput: "table"},
		{name: "json", args: []string{"--output", "json"}, wantOutput: "json"},
		{name: "short flag", args: []string{"-o", "json"}, wantOutput: "json"},
		{name: "bad output", args: []string{"-o", "yaml"}, wantErr: "--output must be table or json"},
		{name: "no arguments", args: []string{"extra"}, wantErr: "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := cmdutil.NewFactory(&cmdutil.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, func(string) string { return "" })
			var got *doctorOptions
			cmd := NewCmd(f, Probes{Host: fakeDoctorHost(true)}, func(o *doctorOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Execute = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got == nil || got.Output != tt.wantOutput {
				t.Fatalf("Execute = %v, options %+v; want output %q", err, got, tt.wantOutput)
			}
		})
	}
}

// fakeDoctorHost is an unprivileged host with everything but cgroup v2; bwrap as given.
func fakeDoctorHost(bwrap bool) doctor.Host {
	return doctor.Host{
		Euid: func() int { return 1000 },
		LookPath: func(f string) (string, error) {
			if f == "bwrap" && !bwrap {
				return "", errors.New("not found")
			}
			return "/usr/bin/" + f, nil
		},
		Resolve:  func(p string) (string, error) { return p, nil },
		Output:   func(context.Context, ...string) ([]byte, error) { return []byte("v1\n"), nil },
		ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist },
		Sandbox: func(context.Context, *compute.HostUser) (string, error) {
			return "bwrap+rlimits", nil
		},
		Cgroup:     func() local.CgroupProbe { return local.CgroupProbe{} },
		MountTmpfs: func() error { return nil },
		Executable: func() (string, error) { return "/usr/bin/agora", nil },
		Stat:       func(string) (fs.FileInfo, error) { return os.Stat("/") },
	}
}

func TestDoctorRun(t *testing.T) {
	defaults := func() (*config.Config, error) { return config.Default("/h"), nil }
	t.Run("text off a terminal", func(t *testing.T) {
		var out bytes.Buffer
		err := doctorRun(t.Context(), &doctorOptions{IO: &cmdutil.IOStreams{Out: &out}, Output: cmdutil.FormatTable, Host: fakeDoctorHost(true), Config: defaults})
		if err != nil {
			t.Fatal(err)
		}
		rows := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(rows) != 11 || rows[0] != "CHECK\tSTATUS\tDETAIL\tFIX" {
			t.Fatalf("%d lines, want the header and 10 rows:\n%s", len(rows), out.String())
		}
		rows = rows[1:]
		for _, row := range rows {
			if f := strings.Split(row, "\t"); len(f) != 4 || (f[1] != "ok" && f[1] != "missing") || (f[1] == "missing") == (f[3] == "-") {
				t.Errorf("row %q: want name, ok|missing, detail, fix (- when ok)", row)
			}
		}
		if !strings.HasPrefix(rows[6], "cgroup-v2\tmissing\t") || !strings.HasPrefix(rows[7], "disk-quota\tmissing\t") {
			t.Errorf("rows:\n%s", out.String())
		}
	})
	t.Run("text on a terminal", func(t *testing.T) {
		var out bytes.Buffer
		err := doctorRun(t.Context(), &doctorOptions{IO: &cmdutil.IOStreams{Out: &out, OutTTY: true}, Output: cmdutil.FormatTable, Host: fakeDoctorHost(true), Config: defaults})
		if err != nil {
			t.Fatal(err)
		}
		s := out.String()
		if !strings.HasPrefix(s, "CHECK ") || !strings.Contains(s, "fix: run agora as root") {
			t.Errorf("terminal output:\n%s", s)
		}
	})
	t.Run("json, and exit 1 when nothing can run", func(t *testing.T) {
		var out bytes.Buffer
		err := doctorRun(t.Context(), &doctorOptions{IO: &cmdutil.IOStreams{Out: &out}, Output: cmdutil.FormatJSON, Host: fakeDoctorHost(false), Config: defaults})
		var ee *cmdutil.ExitCodeError
		if !errors.As(err, &ee) || ee.Code != cmdutil.ExitError || !strings.Contains(err.Error(), "bwrap, user-namespaces") {
			t.Fatalf("err = %v, want exit 1 naming bwrap and user-namespaces", err)
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("stdout is not one JSON document: %v\n%s", err, out.String())
		}
		if got["can_dispatch"] != false {
			t.Errorf("can_dispatch = %v, want false", got["can_dispatch"])
		}
		checks := got["checks"].([]any)
		first := checks[1].(map[string]any)
		// The fields of a check are a contract: added, never renamed.
		if diff := cmp.Diff([]string{"detail", "fix", "name", "required", "status"}, sortedKeys(first)); diff != "" {
			t.Errorf("check fields (-want +got):\n%s", diff)
		}
	})
	t.Run("a config that does not load is a missing check", func(t *testing.T) {
		var out bytes.Buffer
		bad := func() (*config.Config, error) {
			return nil, errors.New("agora.yaml:2: targets.local.disk: at least 1MiB")
		}
		err := doctorRun(t.Context(), &doctorOptions{IO: &cmdutil.IOStreams{Out: &out}, Output: cmdutil.FormatTable, Host: fakeDoctorHost(true), Config: bad})
		if err == nil || !strings.Contains(out.String(), "config\tmissing\tagora.yaml does not load: agora.yaml:2: targets.local.disk") {
			t.Errorf("err %v, output:\n%s", err, out.String())
		}
	})
}

// TestDoctor_ThisHost runs the real command: one JSON document, and AGORA_HOME is not created.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
