package doctor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/runtimebin"
	"github.com/agora-dev/agora/internal/workerbin"
)

// wantNames is the fixed order of the checks.
var wantNames = []string{"config", "bwrap", "prlimit", "user-namespaces", "privileges", "sandbox-uid",
	"cgroup-v2", "disk-quota", "agora-binary", "agora-worker", "agora-worker-exec", "git", "runtime-claude-code", "runtime-codex"}

type fileInfo struct{ mode fs.FileMode }

func (f fileInfo) Name() string       { return "agora" }
func (f fileInfo) Size() int64        { return 1 }
func (f fileInfo) Mode() fs.FileMode  { return f.mode }
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return false }
func (f fileInfo) Sys() any           { return nil }

// healthyRoot is a root host where everything works; gotRunAs records what Sandbox got.
func healthyRoot(gotRunAs **compute.HostUser) Host {
	return Host{
		Euid:     func() int { return 0 },
		LookPath: func(f string) (string, error) { return "/usr/bin/" + f, nil },
		Resolve:  func(p string) (string, error) { return p, nil },
		Output: func(_ context.Context, argv ...string) ([]byte, error) {
			if strings.HasSuffix(argv[0], "bwrap") {
				return []byte("bubblewrap 0.8.0\n"), nil
			}
			return []byte("git version 2.39.5\n"), nil
		},
		ReadFile: func(p string) ([]byte, error) {
			return []byte("root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"), nil
		},
		Sandbox: func(_ context.Context, runAs *compute.HostUser) (string, error) {
			if gotRunAs != nil {
				*gotRunAs = runAs
			}
			return "bwrap+rlimits+runas", nil
		},
		Cgroup: func() local.CgroupProbe {
			return local.CgroupProbe{Parent: "/sys/fs/cgroup/agora.service", Writable: true, Delegated: []string{"memory", "pids"}}
		},
		MountTmpfs: func() error { return nil },
		Executable: func() (string, error) { return "/usr/local/bin/agora", nil },
		Stat:       func(string) (fs.FileInfo, error) { return fileInfo{mode: 0o755}, nil },
		RuntimeBinary: func(_ context.Context, rt, _ string) (runtimebin.Binary, error) {
			return runtimebin.Binary{Runtime: rt, Path: "/opt/" + rt, Version: "1.0", SHA256: strings.Repeat("a", 64)}, nil
		},
		WorkerBinary: func(configured string) (workerbin.Binary, error) {
			return workerbin.Binary{Source: "/usr/local/bin/agora-worker", Version: "agora v1", SHA256: strings.Repeat("b", 64)}, nil
		},
		ExecWorkerBinary: func(worker workerbin.Binary) (workerbin.Binary, error) {
			return workerbin.Binary{Source: workerbin.ExecBeside(worker.Source), Version: "agora v1", SHA256: strings.Repeat("c", 64)}, nil
		},
	}
}

func check(t *testing.T, r Report, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return Check{}
}

func TestRun(t *testing.T) {
	noneOnly := config.Default("/h")
	tg := noneOnly.Targets["local"]
	tg.Sandbox = compute.SandboxNone
	noneOnly.Targets["local"] = tg

	tests := []struct {
		name          string
		host          func(*Host)
		opts          Options
		wantMissing   []string
		canDispatch   bool
		wantInMissing map[string]string // check name -> substring of its detail or fix
	}{
		{name: "healthy root", canDispatch: true},
		{
			// No serve holds the warm slots: doctor says so rather than let warm: read
			// as working; the dispatches still run.
			name:          "warm slots asked for",
			opts:          Options{Config: withWarm(config.Default("/h"), "local", 2)},
			wantMissing:   []string{"warm-slots"},
			canDispatch:   true,
			wantInMissing: map[string]string{"warm-slots": "no running serve holds warm slots of local (warm: 2): their dispatches start cold"},
		},
		{
			name:        "no bwrap",
			host:        func(h *Host) { h.LookPath = lookPathWithout("bwrap") },
			wantMissing: []string{"bwrap", "user-namespaces"},
			wantInMissing: map[string]string{
				"bwrap": "apt-get install bubblewrap",
			},
		},
		{
			name:          "no user namespaces",
			host:          func(h *Host) { h.Sandbox = failingSandbox("setting up uid map: Permission denied") },
			wantMissing:   []string{"user-namespaces"},
			wantInMissing: map[string]string{"user-namespaces": "kernel.unprivileged_userns_clone=1"},
		},
		{
			// A root provider sets a bwrap sandbox's limits with prlimit(2):
			// prlimit(1) is needed by sandbox: none targets only.
			name:          "root without prlimit can still dispatch",
			host:          func(h *Host) { h.LookPath = lookPathWithout("prlimit") },
			wantMissing:   []string{"prlimit"},
			canDispatch:   true,
			wantInMissing: map[string]string{"prlimit": "apt-get install util-linux"},
		},
		{
			name:        "root with prlimit outside /usr",
			host:        func(h *Host) { h.Resolve = func(string) (string, error) { return "/opt/util/prlimit", nil } },
			canDispatch: true,
		},
		{
			name: "unprivileged without prlimit can still dispatch",
			host: func(h *Host) {
				h.Euid = func() int { return 1000 }
				h.LookPath = lookPathWithout("prlimit")
			},
			wantMissing:   []string{"prlimit", "disk-quota"},
			canDispatch:   true,
			wantInMissing: map[string]string{"disk-quota": "run agora as root"},
		},
		{
			name: "sandbox uid owned by an account",
			host: func(h *Host) {
				h.ReadFile = func(p string) ([]byte, error) {
					if p == "/etc/passwd" {
						return []byte("root:x:0:0::/root:/bin/sh\nsvc:x:1879048192:100::/:/bin/false\n"), nil
					}
					return nil, os.ErrNotExist
				}
			},
			wantMissing:   []string{"sandbox-uid"},
			canDispatch:   true,
			wantInMissing: map[string]string{"sandbox-uid": `"svc"`},
		},
		{
			name:          "no cgroup v2",
			host:          func(h *Host) { h.Cgroup = func() local.CgroupProbe { return local.CgroupProbe{V1Pids: true} } },
			wantMissing:   []string{"cgroup-v2"},
			canDispatch:   true,
			wantInMissing: map[string]string{"cgroup-v2": "systemd.unified_cgroup_hierarchy=1"},
		},
		{
			name: "cgroup v2 without delegation",
			host: func(h *Host) {
				h.Cgroup = func() local.CgroupProbe {
					return local.CgroupProbe{Parent: "/sys/fs/cgroup/x", Writable: true, Available: []string{"cpu", "memory", "pids"}}
				}
			},
			wantMissing:   []string{"cgroup-v2"},
			canDispatch:   true,
			wantInMissing: map[string]string{"cgroup-v2": "echo '+memory +pids' > /sys/fs/cgroup/x/cgroup.subtree_control"},
		},
		{
			name: "cgroup v2 with nothing to delegate",
			host: func(h *Host) {
				h.Cgroup = func() local.CgroupProbe {
					return local.CgroupProbe{Parent: "/sys/fs/cgroup/unified", Writable: true, Available: []string{"hugetlb"}}
				}
			},
			wantMissing:   []string{"cgroup-v2"},
			canDispatch:   true,
			wantInMissing: map[string]string{"cgroup-v2": "Delegate=yes"},
		},
		{
			name:          "root cannot mount",
			host:          func(h *Host) { h.MountTmpfs = func() error { return errors.New("operation not permitted") } },
			wantMissing:   []string{"disk-quota"},
			canDispatch:   true,
			wantInMissing: map[string]string{"disk-quota": "CAP_SYS_ADMIN"},
		},
		{
			name:          "binary the sandbox uid cannot run",
			host:          func(h *Host) { h.Stat = func(string) (fs.FileInfo, error) { return fileInfo{mode: 0o700}, nil } },
			wantMissing:   []string{"agora-binary"},
			wantInMissing: map[string]string{"agora-binary": "chmod 0755"},
		},
		{
			// `go install ./cmd/agora` alone: no worker beside agora. No dispatch can start.
			name: "no worker beside agora",
			host: func(h *Host) {
				h.WorkerBinary = func(string) (workerbin.Binary, error) {
					return workerbin.Binary{}, &workerbin.MissingError{Path: "/usr/local/bin/agora-worker", Err: fs.ErrNotExist}
				}
			},
			wantMissing:   []string{"agora-worker"},
			wantInMissing: map[string]string{"agora-worker": "go install ./cmd/agora ./cmd/agora-full ./cmd/agora-worker"},
		},
		{
			// `go install` of the three programs: no exec-only worker. Every dispatch binds
			// agora-worker; doctor says so and what installs it, and nothing is refused.
			name: "no exec-only worker beside the worker",
			host: func(h *Host) {
				h.ExecWorkerBinary = func(workerbin.Binary) (workerbin.Binary, error) {
					return workerbin.Binary{}, &workerbin.MissingError{Path: "/usr/local/bin/agora-worker-exec", Err: fs.ErrNotExist}
				}
			},
			wantMissing:   []string{"agora-worker-exec"},
			wantInMissing: map[string]string{"agora-worker-exec": "make install"},
			canDispatch:   true,
		},
		{
			// One another user planted beside a worker in a sticky directory: exec dispatches
			// would fail, so it is a required check.
			name: "an exec-only worker of another owner",
			host: func(h *Host) {
				h.ExecWorkerBinary = func(workerbin.Binary) (workerbin.Binary, error) {
					return workerbin.Binary{}, errors.New("worker binary /tmp/agora-worker-exec is owned by uid 65534, not uid 0 as /tmp/agora-worker beside it is")
				}
			},
			wantMissing:   []string{"agora-worker-exec"},
			wantInMissing: map[string]string{"agora-worker-exec": "owned by uid 65534"},
		},
		{
			name:          "config does not load",
			opts:          Options{ConfigErr: errors.New("agora.yaml:3: targets.local.disk: at least 1MiB")},
			wantMissing:   []string{"config"},
			wantInMissing: map[string]string{"config": "targets.local.disk"},
		},
		{
			name:        "only sandbox none targets need no bwrap",
			host:        func(h *Host) { h.LookPath = lookPathWithout("bwrap") },
			opts:        Options{Config: noneOnly},
			wantMissing: []string{"bwrap"},
			canDispatch: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := healthyRoot(nil)
			if tt.host != nil {
				tt.host(&h)
			}
			if tt.opts.Config == nil && tt.opts.ConfigErr == nil {
				tt.opts.Config = config.Default("/h")
			}
			r := Run(t.Context(), h, tt.opts)
			var names, missing []string
			for _, c := range r.Checks {
				names = append(names, c.Name)
				if c.Status == StatusMissing {
					missing = append(missing, c.Name)
					if c.Fix == "" {
						t.Errorf("missing check %s has no fix", c.Name)
					}
				} else if c.Status != StatusOK {
					t.Errorf("check %s: status %q", c.Name, c.Status)
				}
			}
			want := wantNames
			if slices.Contains(tt.wantMissing, "warm-slots") { // only said when a target asks
				want = slices.Insert(slices.Clone(wantNames), 1, "warm-slots")
			}
			if slices.Contains(tt.wantMissing, "agora-worker") { // the exec-only worker is looked for beside a worker
				want = slices.DeleteFunc(slices.Clone(want), func(n string) bool { return n == "agora-worker-exec" })
			}
			if diff := cmp.Diff(want, names); diff != "" {
				t.Errorf("checks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMissing, missing); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
			if r.CanDispatch != tt.canDispatch {
				t.Errorf("CanDispatch = %v, want %v", r.CanDispatch, tt.canDispatch)
			}
			for name, want := range tt.wantInMissing {
				c := check(t, r, name)
				if !strings.Contains(c.Detail+" "+c.Fix, want) {
					t.Errorf("check %s = %+v, want %q in its detail or fix", name, c, want)
				}
			}
		})
	}
}

func TestRun_SandboxRunsAsTheSandboxUID(t *testing.T) {
	var got *compute.HostUser
	h := healthyRoot(&got)
	c := config.Default("/h")
	tg := c.Targets["local"]
	tg.SandboxUID = 0x70000005
	c.Targets["local"] = tg
	Run(t.Context(), h, Options{Config: c})
	if want := (&compute.HostUser{UID: 0x70000005, GID: 0x70000005}); !cmp.Equal(got, want) {
		t.Errorf("root: sandbox probed as %+v, want %+v", got, want)
	}
	h.Euid = func() int { return 1000 }
	Run(t.Context(), h, Options{Config: c})
	if got != nil {
		t.Errorf("unprivileged: sandbox probed as %+v, want as the invoking user", got)
	}
}

// TestRun_ThisHost runs every check for real. What is missing depends on the host; the shape
// does not, and bwrap, when installed, starts a sandbox (as the sandbox uid when root).
func TestRun_ThisHost(t *testing.T) {
	r := Run(t.Context(), System(), Options{Config: config.Default(t.TempDir())})
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
		t.Logf("%-8s %-16s %s", c.Status, c.Name, c.Detail)
		if c.Status == StatusMissing && c.Fix == "" {
			t.Errorf("missing check %s has no fix", c.Name)
		}
	}
	want := wantNames
	if check(t, r, "agora-worker").Status == StatusMissing { // the exec-only worker is looked for beside a worker
		want = slices.DeleteFunc(slices.Clone(want), func(n string) bool { return n == "agora-worker-exec" })
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	if err := local.Available(); err != nil {
		t.Skip("SKIP: bubblewrap not usable here (apt-get install bubblewrap): " + err.Error())
	}
	if c := check(t, r, "user-namespaces"); c.Status != StatusOK {
		t.Errorf("bwrap works here, yet %+v", c)
	}
	if os.Geteuid() == 0 && !strings.Contains(check(t, r, "user-namespaces").Detail, "+runas") {
		t.Errorf("root: the probe sandbox did not run as the sandbox uid: %+v", check(t, r, "user-namespaces"))
	}
}

func TestParseIDs(t *testing.T) {
	in := "root:x:0:0:root:/root:/bin/bash\n# comment\n\nbad line\nneg:x:-1:0::/:\nbig:x:4294967296:0::/:\nsvc:x:1879048192:1::/:/bin/false\ndup:x:0:0::/:\nnobody:x:65534:65534::/:"
	want := map[uint32]string{0: "root", 1879048192: "svc", 65534: "nobody"}
	if diff := cmp.Diff(want, ParseIDs([]byte(in))); diff != "" {
		t.Errorf("ParseIDs (-want +got):\n%s", diff)
	}
}

// FuzzParseIDs: never panics, and every id it returns is the third field of a line whose
// first field is the returned name.
func FuzzParseIDs(f *testing.F) {
	f.Add([]byte("root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/:\n"))
	f.Add([]byte("a:b:1879048192"))
	f.Add([]byte("::\n:x:1\n#c:x:2\nx:x:+3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for id, name := range ParseIDs(b) {
			if name == "" || strings.ContainsAny(name, ":\n") {
				t.Fatalf("name %q for id %d", name, id)
			}
			if !slices.ContainsFunc(strings.Split(string(b), "\n"), func(l string) bool {
				f := strings.SplitN(l, ":", 4)
				v, err := strconv.ParseUint(f[min(2, len(f)-1)], 10, 32)
				return len(f) >= 3 && f[0] == name && err == nil && uint32(v) == id
			}) {
				t.Fatalf("id %d (%q) is in no line of %q", id, name, b)
			}
		}
	})
}

func lookPathWithout(missing string) func(string) (string, error) {
	return func(f string) (string, error) {
		if f == missing {
			return "", errors.New(`exec: "` + f + `": executable file not found in $PATH`)
		}
		return "/usr/bin/" + f, nil
	}
}

func failingSandbox(msg string) func(context.Context, *compute.HostUser) (string, error) {
	return func(context.Context, *compute.HostUser) (string, error) { return "", errors.New(msg) }
}

func withWarm(c *config.Config, target string, n int) *config.Config {
	t := c.Targets[target]
	t.Warm = n
	c.Targets[target] = t
	return c
}

// TestWarmSlots_HeldByServe: a running serve's status makes the check ok with its numbers;
// a status that cannot be read is said, never taken for "held".
func TestWarmSlots_HeldByServe(t *testing.T) {
	cfg := withWarm(config.Default("/h"), "local", 4)
	r := Run(t.Context(), healthyRoot(nil), Options{Config: cfg, WarmHolders: []WarmHolder{{PID: 42,
		Counts: []warm.Counts{{Target: "local", Want: 4, Ready: 3, Claimed: 7, Cold: 1}}}}})
	c := check(t, r, "warm-slots")
	if want := "local: warm 3/4 ready (claimed 7, cold 1, failed 0) held by pid 42"; c.Status != StatusOK || c.Detail != want {
		t.Errorf("warm-slots = %+v, want ok %q", c, want)
	}
	r = Run(t.Context(), healthyRoot(nil), Options{Config: cfg, WarmErr: errors.New("permission denied")})
	if c := check(t, r, "warm-slots"); c.Status != StatusMissing || !strings.Contains(c.Detail, "permission denied") {
		t.Errorf("warm-slots with an unreadable status = %+v, want missing naming the error", c)
	}
}

// A docker target's warm slots are held by serve's standby supervisors: without a serve doctor says they start cold and points at the docker
// section; a serve's counts for it show as a local target's do.
func TestWarmSlots_DockerHeldByServe(t *testing.T) {
	cfg := config.Default("/h")
	tg := cfg.Targets["local"]
	tg.Provider, tg.Warm = config.ProviderDocker, 2
	cfg.Targets["box"] = tg
	r := Run(t.Context(), healthyRoot(nil), Options{Config: cfg})
	c := check(t, r, "warm-slots")
	if c.Status != StatusMissing || !strings.Contains(c.Detail, "box (warm: 2)") ||
		!strings.Contains(c.Fix, "agora orch serve") || !strings.Contains(c.Fix, "warm-slots-docker-and-podman") ||
		strings.Contains(c.Detail+c.Fix, "do not hold docker") {
		t.Errorf("warm-slots = %+v, want missing, serve as the fix, the docker section named", c)
	}
	r = Run(t.Context(), healthyRoot(nil), Options{Config: cfg, WarmHolders: []WarmHolder{{PID: 7, Counts: []warm.Counts{{Target: "box", Want: 2, Ready: 2, Claimed: 3}}}}})
	if c := check(t, r, "warm-slots"); c.Status != StatusOK || c.Detail != "box: warm 2/2 ready (claimed 3, cold 0, failed 0) held by pid 7" {
		t.Errorf("warm-slots with serve holding the docker slots = %+v", c)
	}
}

// A kubernetes target's warm pods are a pool serve keeps: doctor names serve and the gateway
// the pods claim through, and points at the kubernetes section.
func TestWarmSlots_KubernetesHeldByServe(t *testing.T) {
	cfg := config.Default("/h")
	tg := cfg.Targets["local"]
	tg.Provider, tg.Warm, tg.Backend, tg.WarmPool = config.ProviderKubernetes, 2, config.BackendAgentSandbox, new(true)
	cfg.Targets["pods"] = tg
	r := Run(t.Context(), healthyRoot(nil), Options{Config: cfg})
	c := check(t, r, "warm-slots")
	if c.Status != StatusMissing || !strings.Contains(c.Detail, "pods (warm: 2)") ||
		!strings.Contains(c.Fix, "for kubernetes targets (pods) orch serve and mcp serve keep their SandboxWarmPool") ||
		!strings.Contains(c.Fix, "agora gateway serve") || strings.Contains(c.Fix, "does not hold kubernetes") ||
		!strings.Contains(c.Fix, "providers-k8s.md#warm-n-on-a-kubernetes-target-30") {
		t.Errorf("warm-slots = %+v, want missing, serve and the gateway as the fix, the kubernetes section named", c)
	}
	r = Run(t.Context(), healthyRoot(nil), Options{Config: cfg, WarmHolders: []WarmHolder{{PID: 9, Counts: []warm.Counts{{Target: "pods", Want: 2, Ready: 2}}}}})
	if c := check(t, r, "warm-slots"); c.Status != StatusOK || c.Detail != "pods: warm 2/2 ready (claimed 0, cold 0, failed 0) held by pid 9" {
		t.Errorf("warm-slots with serve holding the kubernetes slots = %+v", c)
	}
}
