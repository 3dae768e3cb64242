package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/runtimebin"
	"github.com/agora-dev/agora/internal/workerbin"
)

// commandTimeout bounds each command a check runs (bwrap --version, git --version).
const commandTimeout = 10 * time.Second

// maxSystemFile caps what a check reads of a system file.
const maxSystemFile = 4 << 20

// System is the real host.
func System() Host {
	return Host{
		Euid:     os.Geteuid,
		LookPath: exec.LookPath,
		Resolve:  filepath.EvalSymlinks,
		Output: func(ctx context.Context, argv ...string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(ctx, commandTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
			return cmd.CombinedOutput()
		},
		ReadFile: readCapped,
		Sandbox: func(ctx context.Context, runAs *compute.HostUser) (string, error) {
			p, err := local.New(local.Options{})
			if err != nil {
				return "", err
			}
			return p.Probe(ctx, runAs)
		},
		Cgroup:     local.ProbeCgroup,
		MountTmpfs: mountTmpfs,
		Executable: os.Executable,
		Stat:       os.Stat,
		RuntimeBinary: func(ctx context.Context, runtime, configured string) (runtimebin.Binary, error) {
			return runtimebin.Resolve(ctx, runtime, configured)
		},
		WorkerBinary: func(configured string) (workerbin.Binary, error) {
			exe, err := os.Executable()
			if err != nil {
				return workerbin.Binary{}, err
			}
			path, err := workerbin.Locate(exe, configured)
			if err != nil {
				return workerbin.Binary{}, err
			}
			return workerbin.Inspect(path, configured != "", workerbin.Self())
		},
		ExecWorkerBinary: func(worker workerbin.Binary) (workerbin.Binary, error) {
			// As the dispatcher looks: a name that is not there is passed over, anything at it
			// (a link to nothing too) is checked.
			path := workerbin.ExecBeside(worker.Source)
			if !workerbin.ExecThere(path) {
				return workerbin.Binary{}, &workerbin.MissingError{Path: path, Err: fs.ErrNotExist}
			}
			b, err := workerbin.InspectBeside(worker, path, workerbin.Self())
			if errors.Is(err, fs.ErrNotExist) {
				return b, fmt.Errorf("%s is a link to nothing, which fails every exec dispatch (%v)", path, err)
			}
			return b, err
		},
	}
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSystemFile))
}

// mountTmpfs mounts a 1 MiB tmpfs on a fresh temporary directory and undoes both.
func mountTmpfs() error {
	dir, err := os.MkdirTemp("", "agora-doctor-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := unix.Mount("agora-doctor", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=1m,mode=0700"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount the test tmpfs %s: %w", dir, err)
	}
	return nil
}
