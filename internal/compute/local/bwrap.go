package local

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/compute"
)

// Identity and name of the sandbox user and host.
const (
	sandboxUID      = "65534"
	sandboxGID      = "65534"
	sandboxHostname = "agora"
)

// topLevel are the root entries a program needs from the host besides /usr. On a
// merged-/usr system they are symlinks into /usr and are recreated as such.
var topLevel = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcAlways are the /etc entries every sandbox gets, read-only and only when present.
// Private key directories (/etc/ssl/private, /etc/pki/tls/private), /etc/shadow and
// /etc/gitconfig are deliberately absent.
var etcAlways = []string{
	"/etc/alternatives",
	"/etc/ld.so.cache",
	"/etc/passwd",
	"/etc/group",
	"/etc/nsswitch.conf",
	"/etc/hosts",
	"/etc/localtime",
}

// etcNetwork are added only when the sandbox keeps the host network: name resolution
// and the TLS trust store are of no use without it, and every bind costs start time.
var etcNetwork = []string{
	"/etc/ssl/certs",
	"/etc/ssl/openssl.cnf",
	"/etc/pki/tls/certs",
	"/etc/pki/ca-trust/extracted",
	"/etc/resolv.conf",
	"/etc/host.conf",
	"/etc/gai.conf",
}

// systemOptions returns the bwrap options that lay out the read-only system part of the
// sandbox for this host. root is "/" except in tests.
func systemOptions(root string) []string {
	opts := []string{"--ro-bind", "/usr", "/usr"}
	for _, p := range topLevel {
		fi, err := os.Lstat(filepath.Join(root, p))
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(root, p))
			if err == nil && strings.IndexByte(target, 0) < 0 {
				opts = append(opts, "--symlink", target, p)
			}
		case fi.IsDir():
			opts = append(opts, "--ro-bind", p, p)
		}
	}
	return opts
}

// fdLayout says which inherited descriptors bwrap uses for its own plumbing: the ones
// after the spec's files, which are fd 3, 4, ... bwrap closes all three before it runs
// the command.
type fdLayout struct {
	args, info, block int
}

func newFDLayout(nFiles int) fdLayout {
	first := 3 + nFiles
	return fdLayout{args: first, info: first + 1, block: first + 2}
}

// bwrapOptions builds the options that travel on the --args descriptor. They hold the
// environment values, so they MUST NOT be put in any argv.
// With blocked, bwrap reports the sandbox pid on fds.info and waits on fds.block before
// it forks the command. staged names the /etc and /dev laid out beforehand, if any
// ([stageSystem]); bwrap builds the others.
func bwrapOptions(s compute.Spec, system []string, staged stagedSystem, fds fdLayout, blocked bool) []string {
	o := []string{"--clearenv"}
	for _, kv := range sandboxEnv(s) {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PWD" {
			continue // bwrap sets PWD to the --chdir directory itself
		}
		o = append(o, "--setenv", k, v)
	}
	o = append(o, "--unshare-all", "--unshare-user")
	if s.Network || staged.netns {
		// The host's network, or the new namespace the starting thread joined.
		o = append(o, "--share-net")
	}
	o = append(o,
		// The command is the namespace's init: bwrap's own init would run as the sandbox
		// user, attachable with ptrace, and spared by kill(-1), so an agent could take it
		// over and outlive the worker. As init the worker is spared every signal
		// from inside it does not handle (it ignores the rest it can), and its exit ends
		// every process of the sandbox.
		"--as-pid-1",
		"--disable-userns",
		"--die-with-parent",
		"--new-session",
		"--cap-drop", "ALL",
		"--uid", sandboxUID, "--gid", sandboxGID,
		"--hostname", sandboxHostname,
	)
	if blocked {
		o = append(o, "--info-fd", strconv.Itoa(fds.info), "--block-fd", strconv.Itoa(fds.block))
	}
	scratch := strconv.FormatInt(scratchSize(s.Limits), 10)
	shm := strconv.FormatInt(min(scratchSize(s.Limits), maxShm), 10)
	if staged.root != "" {
		// Laid out whole, its flags set and locked (layOutRoot): one bind, devices allowed
		// for /dev's nodes, then what only bwrap can mount in the sandbox's namespaces.
		return append(o, "--dev-bind", staged.root, "/", "--proc", "/proc",
			"--size", shm, "--tmpfs", "/dev/shm",
			"--size", scratch, "--tmpfs", "/tmp",
			"--chdir", workDir(s))
	}
	o = append(o, system...)
	if staged.etc != "" {
		o = append(o, "--ro-bind", staged.etc, "/etc")
	} else {
		for _, p := range etcAlways {
			o = append(o, "--ro-bind-try", p, p)
		}
		if s.Network {
			for _, p := range etcNetwork {
				o = append(o, "--ro-bind-try", p, p)
			}
		}
	}
	o = append(o, "--proc", "/proc")
	if staged.dev != "" {
		o = append(o, "--dev-bind", staged.dev, "/dev")
	} else {
		o = append(o, "--dev", "/dev")
	}
	o = append(o,
		"--size", shm, "--tmpfs", "/dev/shm",
		"--size", scratch, "--tmpfs", "/tmp")
	for _, b := range s.Binds {
		flag := "--ro-bind"
		if b.Writable {
			flag = "--bind"
		}
		o = append(o, flag, b.Src, b.Dst)
	}
	// Last: the sandbox's root and /dev become read-only. bwrap builds both as tmpfs owned
	// by the sandbox user, so an agent could otherwise create /etc/ld.so.preload (run its
	// code in the worker's capture and in every hook after the stop step) or fill memory
	// through an unsized file system. The binds, /tmp and /dev/shm
	// are mounts of their own and keep their modes; device nodes stay writable.
	o = append(o, "--remount-ro", "/dev", "--remount-ro", "/")
	return append(o, "--chdir", workDir(s))
}

// DefaultScratch is the size of /tmp (and the cap of /dev/shm) when Limits.Scratch is 0.
const DefaultScratch = 1 << 30

// maxShm caps /dev/shm below the scratch size: shared memory beyond it is rare in tools.
const maxShm = 256 << 20

// scratchSize is the size of the sandbox's /tmp.
func scratchSize(l compute.Limits) int64 {
	if l.Scratch > 0 {
		return l.Scratch
	}
	return DefaultScratch
}

// encodeArgs joins options NUL-terminated, the format of bwrap --args. validateSpec has
// refused every string with a NUL, so the encoding is unambiguous.
func encodeArgs(opts []string) []byte {
	var b bytes.Buffer
	for _, o := range opts {
		b.WriteString(o)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// bwrapArgv is bwrap's visible command line: no option value beyond the --args
// descriptor number, then the command.
func bwrapArgv(bwrap string, fds fdLayout, argv []string) []string {
	out := []string{bwrap, "--args", strconv.Itoa(fds.args), "--"}
	return append(out, argv...)
}
