package compute_test

import (
	"os"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
)

// A warm slot is claimed by its shape key alone: two specs whose sandboxes differ in anything
// the slot fixes when it starts (environment, binds outside the claim root, limits, network,
// the uid it runs as) MUST have different keys, or a dispatch claims a slot started for
// another's isolation. Only the per-dispatch variables and the claim binds' sources may vary.
func TestSlotShape_EveryIsolationFieldIsInTheKey(t *testing.T) {
	o := compute.WarmOptions{ClaimRoot: "/agora", PerDispatchEnv: []string{"AGORA_DISPATCH_ID"}, ClaimFiles: []string{"/etc/ssl/certs/ca-certificates.crt"}}
	base := func() compute.Spec {
		return compute.Spec{
			Argv:    []string{"/agora/bin/worker", "run"},
			Env:     []string{"PATH=/usr/bin", "AGORA_DISPATCH_ID=01A"},
			Dir:     "/agora/workspace",
			Sandbox: compute.SandboxBwrap,
			Binds: []compute.Bind{
				{Src: "/usr", Dst: "/usr"},
				{Src: "/stage/ws", Dst: "/agora/workspace", Writable: true},
				{Src: "/stage/ca", Dst: "/etc/ssl/certs/ca-certificates.crt"},
			},
			Limits: compute.Limits{Timeout: time.Minute, MaxProcs: 64, FileSize: 1 << 20, Memory: 1 << 30, Scratch: 1 << 20, Disk: 1 << 30},
			RunAs:  &compute.HostUser{UID: 70000, GID: 70000},
		}
	}
	key := compute.SlotShape(base(), o)
	differ := map[string]func(*compute.Spec){
		"env value":            func(s *compute.Spec) { s.Env[0] = "PATH=/tmp/evil" },
		"env added":            func(s *compute.Spec) { s.Env = append(s.Env, "LD_PRELOAD=/tmp/x.so") },
		"env split":            func(s *compute.Spec) { s.Env = []string{"PATH=/usr/bin\nAGORA_DISPATCH_ID=01A"} },
		"argv":                 func(s *compute.Spec) { s.Argv = []string{"/agora/bin/worker run"} },
		"dir":                  func(s *compute.Spec) { s.Dir = "/" },
		"sandbox":              func(s *compute.Spec) { s.Sandbox = compute.SandboxNone },
		"network":              func(s *compute.Spec) { s.Network = true },
		"timeout":              func(s *compute.Spec) { s.Limits.Timeout = time.Hour },
		"max procs":            func(s *compute.Spec) { s.Limits.MaxProcs = 0 },
		"file size":            func(s *compute.Spec) { s.Limits.FileSize = 0 },
		"memory":               func(s *compute.Spec) { s.Limits.Memory = 0 },
		"scratch":              func(s *compute.Spec) { s.Limits.Scratch = 0 },
		"disk":                 func(s *compute.Spec) { s.Limits.Disk = 0 },
		"uid":                  func(s *compute.Spec) { s.RunAs = &compute.HostUser{UID: 70001, GID: 70000} },
		"gid":                  func(s *compute.Spec) { s.RunAs = &compute.HostUser{UID: 70000, GID: 0} },
		"no uid":               func(s *compute.Spec) { s.RunAs = nil },
		"fixed bind source":    func(s *compute.Spec) { s.Binds[0].Src = "/" },
		"fixed bind writable":  func(s *compute.Spec) { s.Binds[0].Writable = true },
		"fixed bind result":    func(s *compute.Spec) { s.Binds[0].Result = true },
		"bind added":           func(s *compute.Spec) { s.Binds = append(s.Binds, compute.Bind{Src: "/", Dst: "/host", Writable: true}) },
		"bind beside root":     func(s *compute.Spec) { s.Binds[1].Dst = "/agora-evil" },
		"claim bind writable":  func(s *compute.Spec) { s.Binds[1].Writable = false },
		"claim bind result":    func(s *compute.Spec) { s.Binds[1].Result = true },
		"claim file writable":  func(s *compute.Spec) { s.Binds[2].Writable = true },
		"claim file elsewhere": func(s *compute.Spec) { s.Binds[2].Dst = "/etc/passwd" },
		"files":                func(s *compute.Spec) { s.Files = make([]*os.File, 1) },
	}
	for name, change := range differ {
		s := base()
		change(&s)
		if compute.SlotShape(s, o) == key {
			t.Errorf("%s: same shape key as the slot's: a dispatch of it claims a slot of another isolation", name)
		}
	}
	same := map[string]func(*compute.Spec){
		"dispatch id":       func(s *compute.Spec) { s.Env[1] = "AGORA_DISPATCH_ID=01B" },
		"claim bind source": func(s *compute.Spec) { s.Binds[1].Src = "/stage/other" },
		"claim file source": func(s *compute.Spec) { s.Binds[2].Src = "/stage/other-ca" },
		"task id":           func(s *compute.Spec) { s.ID = "another" },
	}
	for name, change := range same {
		s := base()
		change(&s)
		if compute.SlotShape(s, o) != key {
			t.Errorf("%s: a per-dispatch difference changed the shape key", name)
		}
	}
}
