package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// stagedSystem names the sandbox's /etc and /dev when they were laid out beforehand in its
// private mount namespace ([stageSystem]); an empty field leaves that directory to bwrap.
//
// bwrap reads and parses /proc/self/mountinfo again for every bind it makes (bubblewrap 0.8's
// bind_mount), and the sandbox's mount namespace shows every mount of the host's.
// /etc's seven entries and --dev's six device nodes were thirteen such binds, about 2.5 ms
// of a cold dispatch; staged, each directory is one bind.
type stagedSystem struct {
	etc, dev string
	// root is the whole root laid out beforehand ([layOutRoot]), /etc and /dev in it, or "".
	root string
	// netns: the starting thread has joined a network namespace made ahead ([netnsPool]),
	// which bwrap shares instead of making its own.
	netns bool
}

// devNodes are the device nodes bwrap's --dev binds from the host, and devLinks the links it
// makes beside them; a staged /dev holds the same.
var (
	devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}
	devLinks = [][2]string{
		{"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
		{"fd", "/proc/self/fd"}, {"core", "/proc/kcore"}, {"ptmx", "pts/ptmx"},
	}
)

// stageSystem lays out /etc and /dev for s under privateRoot. It MUST run on the locked
// thread that entered the sandbox's private mount namespace ([enterPrivateNS]): every mount
// it makes goes away with that namespace. A directory a bind of s lands in (the proxy's
// trust file in /etc) is left to bwrap, which can make the bind's mount point there.
//
// The layout is the one bwrap makes: /etc holds etcAlways (and etcNetwork with s.Network),
// each read-only and only when present on the host; /dev the host's six device nodes, a new
// devpts instance and the same links. Both directories are root's on a tmpfs the sandbox
// user cannot write, and bwrapOptions binds /etc read-only and remounts /dev read-only.
func stageSystem(s compute.Spec) (stagedSystem, error) {
	var st stagedSystem
	var err error
	if !bindsUnder(s.Binds, "/etc") {
		entries := etcAlways
		if s.Network {
			entries = append(append([]string{}, etcAlways...), etcNetwork...)
		}
		if st.etc, err = stageEtc(filepath.Join(privateRoot, "etc"), "/", entries); err != nil {
			return stagedSystem{}, err
		}
	}
	if !bindsUnder(s.Binds, "/dev") {
		if st.dev, err = stageDev(filepath.Join(privateRoot, "dev"), "/dev"); err != nil {
			return stagedSystem{}, err
		}
	}
	return st, nil
}

// bindsUnder reports whether a bind of binds lands at dir or below it.
func bindsUnder(binds []compute.Bind, dir string) bool {
	for _, b := range binds {
		if p := filepath.Clean(b.Dst); p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// stageEtc binds each of entries (absolute /etc paths) from under hostRoot into dir at the
// same place, read-only; an entry missing on the host is left out, as --ro-bind-try does.
// A source that is a link is followed, as bwrap's bind follows it.
func stageEtc(dir, hostRoot string, entries []string) (string, error) {
	if err := mkdirOpen(dir); err != nil {
		return "", fmt.Errorf("stage the sandbox's /etc: %w", err)
	}
	for _, p := range entries {
		src := filepath.Join(hostRoot, p)
		fi, err := os.Stat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("stage %s in the sandbox's /etc: %w", p, err)
		}
		rel := strings.TrimPrefix(p, "/etc/")
		dst := filepath.Join(dir, rel)
		if err := mkdirsOpen(dir, filepath.Dir(rel)); err != nil {
			return "", fmt.Errorf("stage %s in the sandbox's /etc: %w", p, err)
		}
		if err := mountPoint(dst, fi.IsDir()); err != nil {
			return "", fmt.Errorf("stage %s in the sandbox's /etc: %w", p, err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return "", fmt.Errorf("stage %s in the sandbox's /etc: bind: %w", p, err)
		}
		// Read-only here already: the flag is then locked for the sandbox's less privileged
		// namespace, whatever bwrap's own remount does.
		if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return "", fmt.Errorf("stage %s in the sandbox's /etc: make it read-only: %w", p, err)
		}
	}
	return dir, nil
}

// stageDev makes dir the /dev bwrap's --dev makes: hostDev's device nodes bound in, a new
// devpts instance at pts, the links to /proc's descriptors, and an empty shm for the
// sandbox's sized tmpfs.
func stageDev(dir, hostDev string) (string, error) {
	for _, d := range []string{dir, filepath.Join(dir, "pts"), filepath.Join(dir, "shm")} {
		if err := mkdirOpen(d); err != nil {
			return "", fmt.Errorf("stage the sandbox's /dev: %w", err)
		}
	}
	for _, n := range devNodes {
		dst := filepath.Join(dir, n)
		if err := mountPoint(dst, false); err != nil {
			return "", fmt.Errorf("stage /dev/%s: %w", n, err)
		}
		if err := unix.Mount(filepath.Join(hostDev, n), dst, "", unix.MS_BIND, ""); err != nil {
			return "", fmt.Errorf("stage /dev/%s: bind: %w", n, err)
		}
	}
	for _, l := range devLinks {
		if err := os.Symlink(l[1], filepath.Join(dir, l[0])); err != nil {
			return "", fmt.Errorf("stage /dev/%s: %w", l[0], err)
		}
	}
	if err := unix.Mount("devpts", filepath.Join(dir, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC,
		"newinstance,ptmxmode=0666,mode=620"); err != nil {
		return "", fmt.Errorf("stage /dev/pts: %w", err)
	}
	return dir, nil
}

// mkdirOpen creates the directory p, mode 0755 whatever the process's umask (an in-process
// dispatch runs with its caller's, 0077 say): the sandbox user must search every directory
// on the way to what is bound. Only directories created here are chmod'ed, never a bind's.
func mkdirOpen(p string) error {
	if err := os.Mkdir(p, 0o755); err != nil {
		return err
	}
	return os.Chmod(p, 0o755)
}

// mkdirsOpen creates rel's directories below dir that are missing, each with mkdirOpen.
func mkdirsOpen(dir, rel string) error {
	if rel == "." {
		return nil
	}
	p := dir
	for _, name := range strings.Split(rel, "/") {
		p = filepath.Join(p, name)
		if err := mkdirOpen(p); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// mountPoint creates an empty directory or file at p for a bind to land on.
func mountPoint(p string, dir bool) error {
	if dir {
		return os.Mkdir(p, 0o755)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
