package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/strictyaml"
)

func TestDefault(t *testing.T) {
	// Only the sections this test owns are compared; targets, egress and audit have their own.
	got := config.Default("/h")
	if got.Home != "/h" {
		t.Errorf("Default Home = %q, want /h", got.Home)
	}
	if diff := cmp.Diff(config.Catalog{CapabilityMaxSize: 50 << 20}, got.Catalog); diff != "" {
		t.Errorf("Default Catalog mismatch (-want +got):\n%s", diff)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    *string // nil: no agora.yaml
		want    config.ByteSize
		wantErr []string
	}{
		{name: "no file gives defaults", want: 50 << 20},
		{name: "empty file gives defaults", file: ptr(""), want: 50 << 20},
		{name: "empty catalog section", file: ptr("catalog:\n"), want: 50 << 20},
		{name: "unit", file: ptr("catalog:\n  capability_max_size: 100MiB\n"), want: 100 << 20},
		{name: "plain number", file: ptr("catalog:\n  capability_max_size: 52428800\n"), want: 52428800},
		{name: "audit section reserved", file: ptr("audit: {}\n"), want: 50 << 20},
		{
			name:    "unknown field",
			file:    ptr("catalog:\n  capability_max_sise: 1MiB\n"),
			wantErr: []string{"agora.yaml:2: catalog.capability_max_sise: unknown field", "known fields: capability_max_size"},
		},
		{
			name:    "unknown top-level field",
			file:    ptr("sandbox: none\n"),
			wantErr: []string{"agora.yaml:1: sandbox: unknown field", "known fields: ", "catalog"},
		},
		{
			name:    "home is not settable",
			file:    ptr("home: /elsewhere\n"),
			wantErr: []string{`unknown field "home"`},
		},
		{
			name:    "bad size",
			file:    ptr("catalog:\n  capability_max_size: lots\n"),
			wantErr: []string{"agora.yaml:2: catalog.capability_max_size: want a size such as 52428800 or 50MiB, got \"lots\""},
		},
		{
			name:    "zero size",
			file:    ptr("catalog:\n  capability_max_size: 0\n"),
			wantErr: []string{"agora.yaml:2: catalog.capability_max_size: must be positive, got 0"},
		},
		{
			name:    "duplicate key",
			file:    ptr("catalog:\n  capability_max_size: 1MiB\n  capability_max_size: 2MiB\n"),
			wantErr: []string{"agora.yaml:3: catalog.capability_max_size: duplicate key (first at line 2)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.file != nil {
				if err := os.WriteFile(filepath.Join(home, config.FileName), []byte(*tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := config.Load(home)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Load = %+v, want an error", c)
				}
				var es strictyaml.Errors
				if !errors.As(err, &es) {
					t.Errorf("Load error is %T, want strictyaml.Errors", err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Load error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.Home != home || c.Catalog.CapabilityMaxSize != tt.want {
				t.Errorf("Load = home %q size %d, want %q %d", c.Home, c.Catalog.CapabilityMaxSize, home, tt.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestLoad_TooLarge(t *testing.T) {
	home := t.TempDir()
	big := "# " + strings.Repeat("x", 1<<20) + "\n"
	if err := os.WriteFile(filepath.Join(home, config.FileName), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(home); err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Errorf("Load of a 1 MiB+ config = %v, want a size refusal", err)
	}
}

func TestLoad_Unreadable(t *testing.T) {
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, config.FileName), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(home); err == nil {
		t.Errorf("Load with agora.yaml a directory succeeded, want an error")
	}
}

func TestByteSize_UnmarshalText(t *testing.T) {
	tests := []struct {
		in   string
		want config.ByteSize
		ok   bool
	}{
		{"52428800", 52428800, true},
		{"50MiB", 50 << 20, true},
		{"50 MiB", 50 << 20, true},
		{" 1KiB ", 1024, true},
		{"1.5GiB", 3 << 29, true},
		{"2KB", 2000, true},
		{"3MB", 3000000, true},
		{"1GB", 1000000000, true},
		{"512B", 512, true},
		{"0", 0, true}, // accepted here, refused by validation
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"-1MiB", 0, false},
		{"50mib", 0, false},
		{"50 TiB", 0, false},
		{"lots", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e30", 0, false},
		{"4611686018427387904000", 0, false}, // past 2^62
		{"4GiB", 4 << 30, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b config.ByteSize
			err := b.UnmarshalText([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Fatalf("UnmarshalText(%q) = %d, %v; want ok=%v", tt.in, b, err, tt.ok)
			}
			if !tt.ok {
				if !strings.Contains(err.Error(), "want a size such as 52428800 or 50MiB") {
					t.Errorf("error %q does not say what is wanted", err)
				}
				return
			}
			if b != tt.want {
				t.Errorf("UnmarshalText(%q) = %d, want %d", tt.in, b, tt.want)
			}
		})
	}
}

func TestByteSize_String(t *testing.T) {
	tests := []struct {
		in   config.ByteSize
		want string
	}{
		{0, "0"},
		{1000, "1000"},
		{1024, "1KiB"},
		{50 << 20, "50MiB"},
		{3 << 30, "3GiB"},
		{1<<20 + 1, "1048577"},
		{1536 << 10, "1536KiB"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if tt.in == 0 {
			continue
		}
		var back config.ByteSize
		if err := back.UnmarshalText([]byte(tt.in.String())); err != nil || back != tt.in {
			t.Errorf("round trip of %d via %q = %d, %v", int64(tt.in), tt.in.String(), back, err)
		}
	}
}

func TestHomeDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"AGORA_HOME wins", map[string]string{"AGORA_HOME": "/a/h", "XDG_DATA_HOME": "/x", "HOME": "/u"}, "/a/h"},
		{"XDG_DATA_HOME", map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/u"}, "/x/agora"},
		{"HOME", map[string]string{"HOME": "/u"}, "/u/.local/share/agora"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.HomeDir(func(k string) string { return tt.env[k] })
			if err != nil || got != tt.want {
				t.Errorf("HomeDir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("relative AGORA_HOME is made absolute", func(t *testing.T) {
		got, err := config.HomeDir(func(k string) string { return map[string]string{"AGORA_HOME": "rel/h"}[k] })
		wd, _ := os.Getwd()
		if err != nil || got != filepath.Join(wd, "rel/h") {
			t.Errorf("HomeDir = %q, %v; want %q", got, err, filepath.Join(wd, "rel/h"))
		}
	})
}

func TestParse_OverDefaults(t *testing.T) {
	c := config.Default("/h")
	if err := config.Parse("agora.yaml", []byte("audit: {}\n"), c); err != nil {
		t.Fatal(err)
	}
	if c.Catalog.CapabilityMaxSize != config.DefaultCapabilityMaxSize {
		t.Errorf("absent field lost its default: %d", c.Catalog.CapabilityMaxSize)
	}
}

// FuzzParse: agora.yaml parsing never panics, and a config it accepts has every target
// complete and valid.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"catalog:\n  capability_max_size: 50MiB\n",
		"targets:\n  local:\n    network: host\n    timeout: 10m\n",
		"egress:\n  allow_private: [127.0.0.1/32, '10.0.0.0/8']\n",
		"audit:\n  every: 10\n",
		"targets: {x: {sandbox: none}}",
		"targets: {x: {disk: 100MiB, sandbox_uid: 0x70000000}}",
		"leader: {lease: agora-leader, namespace: agora, identity: agora-0, duration: 10s}",
		"leader: {lease: a.b, namespace: c, kubeconfig: /kc}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c := config.Default(t.TempDir())
		if err := config.Parse("agora.yaml", src, c); err != nil {
			return
		}
		for name, tg := range c.Targets {
			if tg.Provider == "" || tg.Sandbox == "" || tg.Network == "" || tg.Timeout <= 0 {
				t.Fatalf("accepted target %q incomplete: %+v", name, tg)
			}
			if tg.Disk < config.MinDisk || tg.SandboxUID == 0 || tg.SandboxUID >= 1<<31 {
				t.Fatalf("accepted target %q with disk %d, sandbox_uid %d", name, tg.Disk, tg.SandboxUID)
			}
		}
		if _, err := c.Egress.Prefixes(); err != nil {
			t.Fatalf("accepted allow_private that does not parse: %v", err)
		}
		checkLeader(t, c.Leader)
	})
}

// checkLeader fails t when an accepted leader: could reach the apiserver malformed: a Lease
// or namespace that is no DNS name, an identity with a space, quote or control, a relative
// kubeconfig, or a duration out of bounds.
func checkLeader(t *testing.T, l config.Leader) {
	t.Helper()
	if !l.Set() {
		if l != (config.Leader{}) {
			t.Fatalf("accepted leader fields without lease and namespace: %+v", l)
		}
		return
	}
	bad := func(s, allowed string) bool {
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(allowed, r)) {
				return true
			}
		}
		return s == ""
	}
	if bad(l.Lease, "-.") || bad(l.Namespace, "-") || len(l.Namespace) > 63 || len(l.Lease) > 253 {
		t.Fatalf("accepted lease %q in namespace %q", l.Lease, l.Namespace)
	}
	if strings.ContainsAny(l.Identity, " \t\n\"'\\") || len(l.Identity) > 128 {
		t.Fatalf("accepted identity %q", l.Identity)
	}
	if l.Kubeconfig != "" && !filepath.IsAbs(l.Kubeconfig) {
		t.Fatalf("accepted relative kubeconfig %q", l.Kubeconfig)
	}
	if d := l.DurationOrDefault(); d < 2*time.Second || d > 5*time.Minute {
		t.Fatalf("accepted duration %s", d)
	}
}
