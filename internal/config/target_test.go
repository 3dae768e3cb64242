package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
)

func TestTarget_DiskAndSandboxUID(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		wantDisk config.ByteSize
		wantUID  config.UID
		wantErr  string
	}{
		{name: "defaults", file: "", wantDisk: 2 << 30, wantUID: 0x70000000},
		{name: "declared target gets defaults", file: "targets:\n  ci: {network: host}\n", wantDisk: 2 << 30, wantUID: 1879048192},
		{name: "disk", file: "targets:\n  ci: {disk: 100MiB}\n", wantDisk: 100 << 20, wantUID: 0x70000000},
		{name: "decimal uid", file: "targets:\n  ci: {sandbox_uid: 1879048200}\n", wantDisk: 2 << 30, wantUID: 1879048200},
		{name: "hex uid", file: "targets:\n  ci: {sandbox_uid: 0x70000001}\n", wantDisk: 2 << 30, wantUID: 0x70000001},
		{name: "disk too small", file: "targets:\n  ci: {disk: 4KiB}\n", wantErr: "agora.yaml:2: targets.ci.disk: at least 1MiB"},
		{name: "uid root", file: "targets:\n  ci: {sandbox_uid: 0}\n", wantErr: "targets.ci.sandbox_uid: 0 is root"},
		{name: "uid hex root", file: "targets:\n  ci: {sandbox_uid: 0x0}\n", wantErr: "0 is root"},
		{name: "uid negative", file: "targets:\n  ci: {sandbox_uid: -1}\n", wantErr: "want a uid such as"},
		{name: "uid octal-looking", file: "targets:\n  ci: {sandbox_uid: \"0700\"}\n", wantErr: "want a uid such as"},
		{name: "uid too large", file: "targets:\n  ci: {sandbox_uid: 2147483648}\n", wantErr: "2^31 or above"},
		{name: "uid past 32 bits", file: "targets:\n  ci: {sandbox_uid: 4294967296}\n", wantErr: "want a uid such as"},
		{name: "uid a name", file: "targets:\n  ci: {sandbox_uid: nobody}\n", wantErr: "want a uid such as"},
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
			name := "local"
			if strings.Contains(tt.file, "ci:") {
				name = "ci"
			}
			got, err := c.Target(name)
			if err != nil {
				t.Fatal(err)
			}
			if got.Disk != tt.wantDisk || got.SandboxUID != tt.wantUID {
				t.Errorf("target %s: disk %s, sandbox_uid %d; want %s, %d", name, got.Disk, got.SandboxUID, tt.wantDisk, tt.wantUID)
			}
		})
	}
}

func TestTarget_ApprovalTimeout(t *testing.T) {
	tests := []struct {
		name, file string
		want       time.Duration
		wantErr    string
	}{
		{name: "default", file: "targets:\n  ci: {network: host}\n", want: 10 * time.Minute},
		{name: "set", file: "targets:\n  ci: {approval_timeout: 90s}\n", want: 90 * time.Second},
		{name: "too short", file: "targets:\n  ci: {approval_timeout: 1ms}\n", wantErr: "targets.ci.approval_timeout: want 1s to 24h0m0s"},
		{name: "too long", file: "targets:\n  ci: {approval_timeout: 25h}\n", wantErr: "targets.ci.approval_timeout"},
		{name: "negative", file: "targets:\n  ci: {approval_timeout: -1s}\n", wantErr: "targets.ci.approval_timeout"},
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
			got, err := c.Target("ci")
			if err != nil {
				t.Fatal(err)
			}
			if got.ApprovalTimeout != tt.want {
				t.Fatalf("approval_timeout = %s, want %s", got.ApprovalTimeout, tt.want)
			}
		})
	}
}

// TestTarget_Warm: warm is 0 by default, taken up to MaxWarm, refused above it and below 0
// with the key named.
func TestTarget_Warm(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
		err  string
	}{
		{"targets: {a: {}}", 0, ""},
		{"targets: {a: {warm: 3}}", 3, ""},
		{"targets: {a: {warm: 16}}", 16, ""},
		{"targets: {a: {warm: 17}}", 0, "targets.a.warm: want 0 to 16"},
		{"targets: {a: {warm: -1}}", 0, "targets.a.warm: want 0 to 16"},
	} {
		c := config.Default(t.TempDir())
		err := config.Parse("agora.yaml", []byte(tc.yaml), c)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if got := c.Targets["a"].Warm; got != tc.want {
			t.Errorf("%s: warm %d, want %d", tc.yaml, got, tc.want)
		}
	}
}

// TestTarget_VerifyCache: verify_cache is none by default, taken as an absolute clean
// directory, and refused when relative, unclean, /, with ':' or on a kubernetes target (which
// runs no verify gate), with the key named.
func TestTarget_VerifyCache(t *testing.T) {
	k8s := "provider: kubernetes, gateway: \"https://gw.example:8443\", image: \"r.example/w@sha256:" + strings.Repeat("a", 64) + "\""
	for _, tc := range []struct {
		yaml, want, err string
	}{
		{"targets: {a: {}}", "", ""},
		{"targets: {a: {verify_cache: /var/cache/agora-verify}}", "/var/cache/agora-verify", ""},
		{"targets: {a: {verify_cache: cache}}", "", "targets.a.verify_cache: want an absolute, clean directory"},
		{"targets: {a: {verify_cache: /var/cache/../../root}}", "", "targets.a.verify_cache: want an absolute, clean directory"},
		{"targets: {a: {verify_cache: /var/cache/}}", "", "targets.a.verify_cache: want an absolute, clean directory"},
		{"targets: {a: {verify_cache: \"/a:/b\"}}", "", "targets.a.verify_cache: want an absolute, clean directory without ':'"},
		{"targets: {a: {verify_cache: /}}", "", "targets.a.verify_cache: not /"},
		{"targets: {a: {" + k8s + ", verify_cache: /var/cache/v}}", "", "targets.a.verify_cache: a kubernetes target runs no verify gate"},
	} {
		c := config.Default(t.TempDir())
		err := config.Parse("agora.yaml", []byte(tc.yaml), c)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if got := c.Targets["a"].VerifyCache; got != tc.want {
			t.Errorf("%s: verify_cache %q, want %q", tc.yaml, got, tc.want)
		}
	}
}
