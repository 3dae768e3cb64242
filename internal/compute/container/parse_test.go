package container

import (
	"errors"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

var testDigest = "sha256:" + strings.Repeat("ab", 32)

func TestParseImage(t *testing.T) {
	for _, tc := range []struct {
		in       string
		wantName string
		pinned   bool // false: ErrNotPinned
		ok       bool
	}{
		{in: "localhost/agora-toolchain@" + testDigest, wantName: "localhost/agora-toolchain", ok: true},
		{in: "localhost/agora-worker:v1@" + testDigest, wantName: "localhost/agora-worker:v1", ok: true},
		{in: "registry.example:5000/team/img:1.2@" + testDigest, wantName: "registry.example:5000/team/img:1.2", ok: true},
		{in: "busybox", pinned: false},
		{in: "busybox:latest", pinned: false},
		{in: "busybox@sha256:abc", pinned: false},
		{in: "busybox@sha256:" + strings.Repeat("AB", 32), pinned: false},
		{in: "busybox@sha512:" + strings.Repeat("ab", 64), pinned: false},
		{in: "@" + testDigest, pinned: true},
		{in: "bad name@" + testDigest, pinned: true},
		{in: "-x@" + testDigest, pinned: true},
		{in: "a@b@" + testDigest, pinned: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			img, err := ParseImage(tc.in)
			if tc.ok {
				if err != nil || img.Name != tc.wantName || img.Digest != testDigest || img.String() != tc.in {
					t.Fatalf("ParseImage = %+v, %v; want name %q", img, err, tc.wantName)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseImage(%q) = %+v, want an error", tc.in, img)
			}
			if !tc.pinned && !errors.Is(err, ErrNotPinned) {
				t.Errorf("error %v, want ErrNotPinned", err)
			}
			if !tc.pinned && !strings.Contains(err.Error(), "REF@sha256:<64 hex>") {
				t.Errorf("error %q does not say what is wanted", err)
			}
		})
	}
}

func FuzzParseImage(f *testing.F) {
	for _, s := range []string{"localhost/x@" + testDigest, "x:1@" + testDigest, "x", "x@", "@", "x@sha256:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		img, err := ParseImage(s)
		if err != nil {
			return
		}
		// One canonical form: what parses prints back as given, and parses again the same.
		if img.String() != s {
			t.Fatalf("ParseImage(%q).String() = %q", s, img.String())
		}
		if again, err := ParseImage(img.String()); err != nil || again != img {
			t.Fatalf("round trip %q: %+v %v", s, again, err)
		}
		if len(img.Digest) != 71 || strings.ContainsAny(img.Name, "@ \t\n") {
			t.Fatalf("accepted %q as %+v", s, img)
		}
	})
}

func TestParseTaskID(t *testing.T) {
	id := strings.Repeat("0f", 32)
	if got, err := parseTaskID("docker:" + id); err != nil || got != id {
		t.Fatalf("parseTaskID = %q, %v", got, err)
	}
	for _, bad := range []string{"", "docker:", "docker:" + id[:12], "docker:" + strings.ToUpper(id), "k8s:ns/job", "local:1:2", "docker:" + id + "0", "docker: " + id[1:], "Docker:" + id} {
		if _, err := parseTaskID(bad); !errors.Is(err, ErrBadTaskID) {
			t.Errorf("parseTaskID(%q) = %v, want ErrBadTaskID", bad, err)
		}
	}
}

func FuzzParseTaskID(f *testing.F) {
	f.Add("docker:" + strings.Repeat("0f", 32))
	f.Add("docker:abc")
	f.Add("local:1:2")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseTaskID(s)
		if err != nil {
			return
		}
		if taskIDPrefix+id != s || len(id) != 64 || !isLowerHex(id) {
			t.Fatalf("parseTaskID(%q) = %q", s, id)
		}
	})
}

// The create request itself, without an engine: every hardening field is set.
func TestCreateOptions(t *testing.T) {
	p := &Provider{imageID: "sha256:" + strings.Repeat("1", 64), shim: DefaultShimPath, runtime: RuntimeRunsc, nanoCPUs: 1.5e9, seccomp: "seccomp=/x.json"}
	r, w := pipeWith(t, "x")
	_ = w
	s := compute.Spec{
		ID:    "01JABCDEF",
		Argv:  []string{"/agora/bin/agora-worker", "worker"},
		Env:   []string{"PATH=/bin", "A=b"},
		Dir:   "/agora/workspace",
		Binds: []compute.Bind{{Src: "/h/ro", Dst: "/ro"}, {Src: "/h/rw", Dst: "/rw", Writable: true}},
		RunAs: &compute.HostUser{UID: 1879048200, GID: 1879048200},
	}
	s.Files = nil
	s.Files = append(s.Files, r)
	s.Limits.MaxProcs = 64
	opts, iso, err := p.createOptions(s)
	if err != nil {
		t.Fatal(err)
	}
	c, h := opts.Config, opts.HostConfig
	if iso != "docker+readonly+capdrop+nonroot+nonet+pids+memory+runsc" {
		t.Errorf("isolation %q", iso)
	}
	if opts.Name != "agora-01JABCDEF" || opts.Image != p.imageID || c.Labels[LabelDispatch] != "01JABCDEF" {
		t.Errorf("name %q image %q labels %v", opts.Name, opts.Image, c.Labels)
	}
	if got := strings.Join(c.Entrypoint, " "); got != "/agora/bin/agora-worker fdpass -- /agora/bin/agora-worker worker" || c.Cmd == nil || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q", got, c.Cmd)
	}
	if c.User != "1879048200:1879048200" || c.WorkingDir != "/agora/workspace" || !c.OpenStdin || !c.StdinOnce || !c.NetworkDisabled {
		t.Errorf("config %+v", c)
	}
	if strings.Join(c.Env, " ") != "PATH=/bin A=b PWD=/agora/workspace" {
		t.Errorf("env %q", c.Env)
	}
	if !h.ReadonlyRootfs || strings.Join(h.CapDrop, ",") != "ALL" || h.NetworkMode != "none" || h.Privileged || h.AutoRemove {
		t.Errorf("host config %+v", h)
	}
	if strings.Join(h.SecurityOpt, " ") != "no-new-privileges seccomp=/x.json" || h.Runtime != RuntimeRunsc {
		t.Errorf("security %q runtime %q", h.SecurityOpt, h.Runtime)
	}
	if *h.PidsLimit != 64 || h.Memory != DefaultMemory || h.MemorySwap != DefaultMemory || h.NanoCPUs != 1.5e9 {
		t.Errorf("resources %+v", h.Resources)
	}
	if len(h.Mounts) != 2 || !h.Mounts[0].ReadOnly || h.Mounts[1].ReadOnly {
		t.Errorf("mounts %+v", h.Mounts)
	}
	if !strings.Contains(h.Tmpfs["/tmp"], "size=1073741824") || h.ShmSize != maxShm {
		t.Errorf("tmpfs %v shm %d", h.Tmpfs, h.ShmSize)
	}
	// The secret's bytes appear nowhere in the request.
	for _, v := range append(append(c.Entrypoint, c.Env...), h.SecurityOpt...) {
		if strings.Contains(v, "/proc/") || strings.Contains(v, "fd/") {
			t.Errorf("request names a descriptor path: %q", v)
		}
	}
	// The nproc ulimit is set, and binds only because the user is the dispatch's own.
	var nproc int64
	for _, u := range h.Ulimits {
		if u.Name == "nproc" && u.Soft == u.Hard {
			nproc = u.Hard
		}
	}
	if nproc != 64 {
		t.Errorf("nproc ulimit %d, want 64 soft and hard (ulimits %+v)", nproc, h.Ulimits)
	}
	// Without files, no stdin and no shim.
	s.Files = nil
	opts, _, _ = p.createOptions(s)
	if opts.Config.OpenStdin || opts.Config.Entrypoint[0] != "/agora/bin/agora-worker" || opts.Config.Entrypoint[1] != "worker" {
		t.Errorf("without files: %+v", opts.Config)
	}
	// Without a user of its own the spec is refused, never run as a shared one.
	s.RunAs = nil
	if _, _, err := p.createOptions(s); !errors.Is(err, ErrNoRunAs) {
		t.Errorf("createOptions without RunAs: %v, want ErrNoRunAs", err)
	}
}
