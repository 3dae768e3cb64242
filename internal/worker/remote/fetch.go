package remote

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// DispatchEnv names the dispatch id in the pod's environment (the host sets it for every
// worker).
const DispatchEnv = remote.DispatchEnv

// fetchTimeout bounds the whole fetch step.
const fetchTimeout = 30 * time.Minute

// Version is this worker's identity as the host compares it ([remote.Identity]): its module
// version, with the sha256 of its own bytes for a build without one or from a modified tree
// (read once; only such builds pay for the hash).
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	v := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		v = info.Main.Version
	}
	if !remote.NeedsDigest(v) {
		return v
	}
	sum, _ := fileSHA256("/proc/self/exe")
	return remote.Identity(v, sum)
})

// VersionOf is the identity of the worker program at path, as that worker's [Version] will
// say it: what a host's gateway reports, so that the worker it dispatches to is compared
// with the worker program the host has, not with the host's own build. A file that
// cannot be read has an identity no worker matches, and the worker's refusal names it.
func VersionOf(path string) string {
	v := ""
	if info, err := buildinfo.ReadFile(path); err == nil {
		v = info.Main.Version
	}
	if !remote.NeedsDigest(v) {
		return v
	}
	sum, _ := fileSHA256(path)
	return remote.Identity(v, sum)
}

// maxProgram caps the bytes hashed as a worker program (the binary-level test keeps the
// worker under 20 MiB).
const maxProgram = 256 << 20

// fileSHA256 is the lowercase hex sha256 of a program's bytes, "" when it cannot be read.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxProgram)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// FetchMain is `agora worker fetch`, the pod's init step: it reads the gateway's address,
// token and CA from the environment, checks that the host runs this agora's version,
// downloads every Fetch mount into $AGORA_STAGE/NAME (a File mount as NAME/file) and copies
// its own binary to $AGORA_STAGE/bin/agora (0555) for the worker's container. It returns the
// process exit code.
func FetchMain(ctx context.Context, stderr io.Writer) int {
	if err := fetch(ctx, stderr); err != nil {
		fmt.Fprintf(stderr, "agora worker fetch: error: %v\n", err)
		return ExitCode(err)
	}
	return 0
}

func fetch(ctx context.Context, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	stage := os.Getenv(remote.StageEnv)
	os.Unsetenv(remote.StageEnv)
	if stage == "" || !filepath.IsAbs(stage) {
		return fmt.Errorf("%s must name the stage directory, an absolute path", remote.StageEnv)
	}
	if SlotEnabled() {
		// A Kubernetes warm slot's init step: no dispatch exists yet, and it holds no
		// token; its filler and worker fetch the dispatch's mounts once it claims one. It
		// makes the read-only places' entries (slotfill.go).
		if v, ok := os.LookupEnv(remote.SlotPlacesEnv); ok {
			places, err := remote.ParseSlotPlaces(v)
			if err != nil {
				return err
			}
			if err := premakePlaces(stage, places); err != nil {
				return err
			}
		}
		if err := copySelf(filepath.Join(stage, wire.BinDir, wire.BinFile)); err != nil {
			return err
		}
		if os.Getenv(remote.SlotEnrollEnv) != "" {
			// An agent-sandbox pool pod: it has no slot until it enrols with its
			// projected token, which only this step mounts.
			return enrollFromEnv(ctx, stderr)
		}
		return nil
	}
	c, err := FromEnv(os.Getenv(DispatchEnv))
	if err != nil {
		return err
	}
	defer c.Close()
	c.log = stderr
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	if v := Version(); info.Version != v {
		return fmt.Errorf("worker image is agora %s, the host runs %s: rebuild it with make image", v, info.Version)
	}
	for _, m := range info.Mounts {
		if !m.Fetch {
			continue
		}
		if !remote.ValidMountName(m.Name) {
			return fmt.Errorf("mount name %q is not valid", m.Name)
		}
		if err := c.Fetch(ctx, m, filepath.Join(stage, m.Name)); err != nil {
			return err
		}
	}
	return copySelf(filepath.Join(stage, wire.BinDir, wire.BinFile))
}

// copySelf copies the running binary to dst, mode 0555.
func copySelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("copy the agora binary: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("copy the agora binary: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("copy the agora binary: %w", err)
	}
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o555)
	if err != nil {
		return fmt.Errorf("copy the agora binary: %w", err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copy the agora binary: %w", err)
	}
	return nil
}
