package container

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/compute"
)

// Defaults for a zero [compute.Limits] field, the same as the local provider's.
const (
	DefaultMaxProcs = 256
	DefaultFileSize = 1 << 30
	DefaultMemory   = 4 << 30
	DefaultScratch  = 1 << 30
	// maxShm caps /dev/shm whatever the scratch size, as the local provider does.
	maxShm = 256 << 20
	// nofile is every container's open-file limit.
	nofile = 4096
)

// LabelDispatch marks every container this provider creates with its dispatch id; Cancel
// touches only containers that carry it.
const LabelDispatch = "agora.dispatch"

// ErrNetwork refuses a spec that asks for the host's network.
var ErrNetwork = errors.New("network: host is not available on a container target")

// ErrNoRunAs refuses a spec without its own host user. The nproc ulimit (RLIMIT_NPROC) is
// counted per host uid across every container, not per container: with one uid shared by
// all dispatches, one agent that forks up to its limit keeps every other dispatch from
// forking at all. Each dispatch therefore runs as its own uid,
// which only a root agora can hand the stage to.
var ErrNoRunAs = errors.New("a container dispatch runs as its own host uid, and this one has none: " +
	"agora must run as root to give each dispatch a uid of the target's sandbox_uid range and hand it the stage")

// maxIDLen bounds a dispatch id in a container name (Docker allows 253 bytes in a name).
const maxIDLen = 128

// createOptions turns s into a hardened create request, and says which isolation applies.
func (p *Provider) createOptions(s compute.Spec) (client.ContainerCreateOptions, string, error) {
	if err := checkSpec(s); err != nil {
		return client.ContainerCreateOptions{}, "", err
	}
	uid, gid := s.RunAs.UID, s.RunAs.GID
	lim := withDefaults(s.Limits)
	dir := cmp.Or(s.Dir, "/")
	entry := s.Argv
	stdin := len(s.Files) == 1
	if stdin {
		// fdpass moves the stdin bytes to fd 3 and execs Argv: see the package doc.
		entry = append([]string{p.shim, "fdpass", "--"}, s.Argv...)
	}
	mounts := make([]mount.Mount, 0, len(s.Binds))
	for _, b := range s.Binds {
		mounts = append(mounts, mount.Mount{
			Type: mount.TypeBind, Source: b.Src, Target: b.Dst, ReadOnly: !b.Writable,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	pids := int64(lim.MaxProcs)
	cfg := &container.Config{
		User:       strconv.FormatUint(uint64(uid), 10) + ":" + strconv.FormatUint(uint64(gid), 10),
		Env:        append(append([]string(nil), s.Env...), "PWD="+dir),
		WorkingDir: dir,
		// An explicit entrypoint and an empty (non-nil) Cmd: nothing of the image's own runs.
		Entrypoint:   entry,
		Cmd:          []string{},
		Labels:       map[string]string{LabelDispatch: s.ID},
		AttachStdout: true, AttachStderr: true,
		AttachStdin: stdin, OpenStdin: stdin, StdinOnce: stdin,
		NetworkDisabled: true,
		Hostname:        "agora",
	}
	host := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges", p.seccomp},
		Mounts:         mounts,
		Tmpfs:          map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", lim.Scratch)},
		ShmSize:        min(lim.Scratch, maxShm),
		Runtime:        p.runtime,
		Resources: container.Resources{
			Memory: lim.Memory, MemorySwap: lim.Memory,
			NanoCPUs:  p.nanoCPUs,
			PidsLimit: &pids,
			Ulimits: []*container.Ulimit{
				{Name: "fsize", Soft: lim.FileSize, Hard: lim.FileSize},
				{Name: "nofile", Soft: nofile, Hard: nofile},
				// Per host uid, so per dispatch only because RunAs is (ErrNoRunAs). podman
				// sets nproc from containers.conf when the request has none, so leaving it
				// out would not remove it.
				{Name: "nproc", Soft: int64(lim.MaxProcs), Hard: int64(lim.MaxProcs)},
			},
		},
	}
	iso := "docker+readonly+capdrop+seccomp+nonroot+nonet+pids+memory"
	if p.runtime == RuntimeRunsc {
		// runsc does not load the container's seccomp profile into its sandbox (only with
		// its --oci-seccomp, under which agora's profile stops the Go runtime's threads):
		// gVisor's Sentry, confined by gVisor's own filters, is what stands between the
		// agent and the host's kernel, so the record says runsc and not seccomp.
		iso = "docker+readonly+capdrop+nonroot+nonet+pids+memory+runsc"
	}
	return client.ContainerCreateOptions{
		Config: cfg, HostConfig: host, Name: "agora-" + s.ID, Image: p.imageID,
	}, iso, nil
}

// checkSpec refuses what a container cannot do as the spec asks, rather than doing less.
func checkSpec(s compute.Spec) error {
	if s.Network {
		return ErrNetwork
	}
	if s.Sandbox != "" && s.Sandbox != compute.SandboxBwrap {
		return fmt.Errorf("sandbox %q is not available on a container target; the container is the sandbox", s.Sandbox)
	}
	if !validID(s.ID) {
		return fmt.Errorf("dispatch id %q cannot name a container; want [a-zA-Z0-9_.-], at most %d bytes", s.ID, maxIDLen)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("empty argv")
	}
	if s.RunAs == nil {
		return ErrNoRunAs
	}
	if s.RunAs.UID == 0 || s.RunAs.GID == 0 {
		return errors.New("run as uid or gid 0 refused: a container never runs agora's worker as root")
	}
	if len(s.Files) > 1 {
		return fmt.Errorf("%d files to pass; a container target passes at most one (fd 3, on stdin)", len(s.Files))
	}
	if s.Dir != "" && !path.IsAbs(s.Dir) {
		return fmt.Errorf("working directory %q is not absolute", s.Dir)
	}
	for _, b := range s.Binds {
		if !path.IsAbs(b.Src) || !path.IsAbs(b.Dst) || path.Clean(b.Dst) == "/" {
			return fmt.Errorf("bind %q -> %q: both paths must be absolute, and the target not /", b.Src, b.Dst)
		}
		if strings.ContainsAny(b.Src+b.Dst, ",\n\x00") {
			return fmt.Errorf("bind %q -> %q: a comma, newline or NUL in a path is refused", b.Src, b.Dst)
		}
	}
	for _, e := range s.Env {
		if !strings.Contains(e, "=") || strings.HasPrefix(e, "=") {
			return fmt.Errorf("environment entry without a name refused")
		}
	}
	return nil
}

// validID accepts the dispatch ids agora makes (ULIDs) and anything else safe in a
// container name.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLen || id[0] == '.' || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// withDefaults fills a zero limit with the provider's default.
func withDefaults(l compute.Limits) compute.Limits {
	if l.MaxProcs <= 0 {
		l.MaxProcs = DefaultMaxProcs
	}
	if l.FileSize <= 0 {
		l.FileSize = DefaultFileSize
	}
	if l.Memory <= 0 {
		l.Memory = DefaultMemory
	}
	if l.Scratch <= 0 {
		l.Scratch = DefaultScratch
	}
	return l
}
