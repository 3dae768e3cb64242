package local

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/compute/host"
)

// cgroupPrefix starts the name of every task cgroup; Cancel only ever kills cgroups
// whose name has it.
const cgroupPrefix = "agora-"

// cgroupDrainTimeout bounds the wait for a killed cgroup to empty before it is removed.
const cgroupDrainTimeout = 5 * time.Second

// cgroup is one task's own cgroup v2 directory.
type cgroup struct {
	dir       string
	fd        *os.File // open directory, for CLONE_INTO_CGROUP
	memoryMax bool
	pidsMax   bool
}

// cgroupV2Mount returns the mount point of the cgroup v2 hierarchy and the root of that
// mount inside the hierarchy, from /proc/self/mountinfo.
func cgroupV2Mount() (mount, root string, err error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	return parseCgroupV2Mount(b)
}

// parseCgroupV2Mount finds the first cgroup2 mount in a mountinfo file: fields are
// "id parent maj:min root mountpoint options [optional...] - fstype source superopts".
func parseCgroupV2Mount(b []byte) (mount, root string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 || qf[0] != "cgroup2" {
			continue
		}
		return host.UnescapeMountinfo(pf[4]), host.UnescapeMountinfo(pf[3]), nil
	}
	return "", "", errors.New("no cgroup2 mount")
}

// procCgroupV2Path returns the cgroup v2 path ("0::<path>") of a process.
func procCgroupV2Path(pid string) (string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 entry")
}

// cgroupDir maps a cgroup path (as /proc/<pid>/cgroup shows it) to its directory under
// the mount, refusing anything that would step outside it.
func cgroupDir(mount, root, path string) (string, error) {
	rel := path
	if root != "/" {
		r, ok := strings.CutPrefix(path, root)
		if !ok || (r != "" && r[0] != '/') {
			return "", fmt.Errorf("cgroup %q is outside the mounted root %q", path, root)
		}
		rel = r
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("cgroup %q is not absolute", path)
	}
	if strings.Contains(rel, "..") || strings.HasSuffix(rel, " (deleted)") {
		return "", fmt.Errorf("cgroup %q is not usable", path)
	}
	return filepath.Join(mount, rel), nil
}

// detectCgroupParent returns the directory of this process's own cgroup v2, under which
// task cgroups are created, or "" when there is no cgroup v2 hierarchy that could hold them.
func detectCgroupParent() string {
	mount, root, err := cgroupV2Mount()
	if err != nil {
		return ""
	}
	path, err := procCgroupV2Path("self")
	if err != nil {
		return ""
	}
	dir, err := cgroupDir(mount, root, path)
	if err != nil {
		return ""
	}
	return dir
}

// cgroupSuffixLen is the length of the random hex suffix of a task cgroup's name.
const cgroupSuffixLen = 12

// cgroupNameMax caps the part of a task cgroup's name before its random suffix.
const cgroupNameMax = 64

// cgroupBase is the name of a task cgroup of dispatch id without its random suffix: the
// prefix and the id's characters that are safe in a path component, cut at cgroupNameMax
// bytes. exact is false when a character was dropped or cut, since another id could then
// share the base: [Provider.Release] refuses such an id rather than guess.
func cgroupBase(id string) (base string, exact bool) {
	var b strings.Builder
	b.WriteString(cgroupPrefix)
	exact = id != ""
	for _, r := range id {
		if b.Len() >= cgroupNameMax {
			return b.String(), false
		}
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			exact = false
		}
	}
	return b.String(), exact
}

// cgroupName builds a unique task cgroup name from the dispatch id: its base and a random
// suffix, so a later task of the same id never finds its name taken.
func cgroupName(id string) string {
	base, _ := cgroupBase(id)
	var rnd [cgroupSuffixLen / 2]byte
	_, _ = rand.Read(rnd[:])
	return base + "-" + hex.EncodeToString(rnd[:])
}

// isCgroupOf reports whether name is a task cgroup name cgroupName made from base: the
// base, a dash and exactly the random suffix, so that the base of id "a" never matches a
// cgroup of id "a-b".
func isCgroupOf(name, base string) bool {
	suffix, ok := strings.CutPrefix(name, base+"-")
	if !ok || len(suffix) != cgroupSuffixLen {
		return false
	}
	for i := 0; i < len(suffix); i++ {
		if c := suffix[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// newCgroup creates a task cgroup under parent and sets memory.max and pids.max when the
// parent delegates those controllers. It returns nil, nil when no cgroup can be made
// here (no permission, or a kernel without cgroup.kill): the caller then records that no
// cgroup applied.
func newCgroup(parent, id string, l limits) (*cgroup, error) {
	dir := filepath.Join(parent, cgroupName(id))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, nil // no cgroup here is a supported, recorded outcome
	}
	cg := &cgroup{dir: dir}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		cg.remove()
		return nil, nil
	}
	if exists(filepath.Join(dir, "memory.max")) {
		if err := cg.write("memory.max", strconv.FormatUint(l.as, 10)); err != nil {
			cg.remove()
			return nil, err
		}
		if exists(filepath.Join(dir, "memory.swap.max")) {
			if err := cg.write("memory.swap.max", "0"); err != nil {
				cg.remove()
				return nil, err
			}
		}
		cg.memoryMax = true
	}
	if exists(filepath.Join(dir, "pids.max")) {
		if err := cg.write("pids.max", strconv.FormatUint(l.nproc, 10)); err != nil {
			cg.remove()
			return nil, err
		}
		cg.pidsMax = true
	}
	fd, err := os.Open(dir)
	if err != nil {
		cg.remove()
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	cg.fd = fd
	return cg, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (cg *cgroup) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("write cgroup %s: %w", file, err)
	}
	return nil
}

// closeFD releases the directory descriptor once the process has been cloned into it.
func (cg *cgroup) closeFD() {
	if cg.fd != nil {
		_ = cg.fd.Close()
		cg.fd = nil
	}
}

// kill sends SIGKILL to every process in the cgroup.
func (cg *cgroup) kill() { _ = cg.write("cgroup.kill", "1") }

// remove kills what is left, waits for the cgroup to empty and removes it. It fails only
// when the cgroup is still there after cgroupDrainTimeout (a process stuck in the kernel).
func (cg *cgroup) remove() error {
	cg.closeFD()
	if exists(filepath.Join(cg.dir, "cgroup.kill")) {
		cg.kill()
	}
	// The last exits are accounted asynchronously; rmdir fails with EBUSY until then.
	deadline := time.Now().Add(cgroupDrainTimeout)
	for pause := 50 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		err := os.Remove(cg.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", cg.dir, err)
		}
		time.Sleep(pause)
	}
}

// killCgroupOf kills the task cgroup that process pid belongs to, if it is one of ours.
func killCgroupOf(pid int) {
	mount, root, err := cgroupV2Mount()
	if err != nil {
		return
	}
	path, err := procCgroupV2Path(strconv.Itoa(pid))
	if err != nil || !strings.HasPrefix(filepath.Base(path), cgroupPrefix) {
		return
	}
	dir, err := cgroupDir(mount, root, path)
	if err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
}
