package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// stage is one dispatch's directory on the host: the bundle the worker verifies, the
// workspace, the out directory, and the live logs.
//
// For a root agora with a bwrap target, the workspace and out directory live on a tmpfs of
// the target's disk size mounted at disk/ (the quota; the logs stay outside it, so `dispatch
// logs -f` can read them after it is gone), and everything the sandbox reads or writes is
// handed to the target's sandbox uid. AGORA_HOME and the stage directory stay 0700 root: the
// provider binds the sources from a private mount namespace.
type stage struct {
	dir string
	// bundle is the dispatch's own bundle directory: its manifest.json, and for `sandbox:
	// none` the whole bundle. shared is the entry of .bundles bound under it, "" for none.
	bundle    string
	shared    string
	workspace string
	out       string
	stdout    string
	stderr    string
	// disk is the mount point of the quota's tmpfs, "" when none is mounted; diskSize its
	// size in bytes.
	disk     string
	diskSize int64
	// pinned is the mount point of the pinned content's tmpfs (see pinnedDir), which the
	// bundle and capability files are on when it is mounted.
	pinned string
	// owner is the host user the sandbox runs as, nil for the invoking user.
	owner *compute.HostUser
	// sandboxed is false for `sandbox: none`, which gets neither the owner nor the quota.
	sandboxed bool
	// podFiles is true when the sandbox writes files of its own, not the stage's: a
	// kubernetes pod's workspace and out directory are emptyDirs on its node, which the
	// stage only uploads and downloads, so no quota of the stage bounds what it writes.
	podFiles bool
	// held is the stage's entry in the held index (see heldDir).
	held string
	// capFiles is the capability files' layout (capabilityFilesDir).
	capFiles string
	// release, for a stage a warm slot made ahead (prestaged), hands its bundle, workspace,
	// out directory, capability files and quota back to the slot, whose teardown removes them;
	// nil for a stage of the dispatch's own.
	release func()
	// making is makeFiles while it runs (makeFilesBeside, from stage); nil when it never ran.
	// logs are the log files it made, until takeLogs takes them.
	making *sync.WaitGroup
	logs   [2]*os.File
	// phaseF is the stage's own phase file, open for its in-place writes (setPhase).
	phaseF *os.File
}

// prestaged is a warm slot's stage taken by the dispatch claiming the slot (local's
// slotstage.go): its directories, made and bound into the slot's sandbox at fill, empty, on a
// disk quota of the target's size (disk, "" when the target has none).
type prestaged struct {
	bundle, workspace, out, capFiles, disk string
	release                                func()
}

// diskDir is the quota's mount point inside the stage directory.
const diskDir = "disk"

// pinnedDir, inside the stage directory, is the mount point of a tmpfs of the dispatch's own
// that a root agora stages the bundle and the capability files on: the pinned catalog
// content, which only the host writes and the sandbox reads through read-only binds. On the
// stage directory's own filesystem they are a dozen files and directories made and deleted
// per dispatch: half a millisecond on ext4, one to two on an ext4 without a journal (whose
// inode allocator steps over every inode deleted in the last minute); on a tmpfs a fraction
// of that, and one unmount takes them all. It is not the quota: `disk:` stays the agent's
// room (ADR 0034). Only content that fitsPinnedTmpfs goes there, since tmpfs pages are
// memory where the stage directory's are page cache; larger content stays beside it, as
// without root.
const pinnedDir = "pinned"

// maxPinnedOnTmpfs is the most pinned catalog content (the stored sizes of the subagent and
// its capabilities) staged on the pinned tmpfs, and pinnedTmpfsFiles the most files and
// directories (pinnedFilesFit). pinnedTmpfsSize caps that tmpfs above what such content can
// take: the bundle holds each capability's stored archive (at most 8 MiB in all) and the
// capability files lay it out again, each file rounded up to a page; an archive spends at
// least 512 bytes an entry, so 8 MiB holds at most 16384 entries, 64 MiB of pages.
// Directories take no pages but an inode each, and one entry's path can name hundreds of
// them: hence the count. Only the host writes there, so neither cap is a limit content
// that passes both tests meets; they keep a capability of deep empty trees from pinning
// kernel memory, as its directories on ext4 would not.
const (
	maxPinnedOnTmpfs = 8 << 20
	pinnedTmpfsSize  = 128 << 20
	pinnedTmpfsFiles = 2*(maxPinnedOnTmpfs/512) + 1024
)

// pinnedFilesFit counts the files and directories the stage writes of p's content, and
// says whether they are pinnedTmpfsFiles or fewer: the bundle (its directory,
// manifest.json, subagent.json, its capabilities directory and one archive a capability) and
// the capability files (their directory, and for each capability its directory, its entries
// and every directory on their paths). An archive that does not read does not fit (staging
// reports why).
func (d *Dispatcher) pinnedFilesFit(p *pinned) bool {
	n := 5 + len(p.capabilities)
	for _, v := range p.capabilities {
		data, err := d.Catalog.Content(v)
		if err != nil {
			return false
		}
		if n += capabilityFiles(data); n > pinnedTmpfsFiles {
			return false
		}
	}
	return true
}

// capabilityFiles counts the files and directories a capability's stored archive lays out:
// its own directory, its entries and every directory on their paths; past pinnedTmpfsFiles
// for an archive that does not read.
func capabilityFiles(stored []byte) int {
	files, err := catalog.ReadStored(stored)
	if err != nil {
		return pinnedTmpfsFiles + 1
	}
	dirs := map[string]bool{}
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "." && dir != "/" && !dirs[dir]; dir = path.Dir(dir) {
			dirs[dir] = true
		}
	}
	return 1 + len(files) + len(dirs)
}

// heldDir, beside the stage directories, indexes the stages that still hold work on the
// host (a disk quota, bundle, workspace, out directory, gateway): an empty file named for
// the dispatch, made before any of it and removed after all of it is gone. A supervisor
// killed with -9 leaves its entry, even when its record is already terminal (`dispatch
// cancel` records the end itself when the supervisor is stuck), so Reap finds every such
// stage by reading this directory, which holds only the running and the leaked ones,
// instead of visiting every record or stage.
const heldDir = ".held"

// stageLimits are what a root agora enforces itself for one dispatch.
type stageLimits struct {
	sandboxed bool
	podFiles  bool // see stage.podFiles
	owner     *compute.HostUser
	disk      int64 // bytes; 0: no quota is mounted
	// pinned: the dispatch's pinned catalog content goes on the pinned tmpfs (pinnedDir),
	// when the quota mounts.
	pinned bool
}

// limitsFor decides who runs the sandbox of a dispatch on target and whether its disk quota
// is mounted. Only root can do either; an unprivileged agora runs sandboxes as itself, which
// the kernel's process limit binds already, and cannot mount. `sandbox: none` is the explicit
// escape and gets neither: it runs as the invoking user on the host's own files.
func limitsFor(target config.Target, sandbox, id string) stageLimits {
	l := stageLimits{sandboxed: sandbox != compute.SandboxNone, podFiles: target.Provider == config.ProviderKubernetes}
	if !l.sandboxed || os.Geteuid() != 0 {
		return l
	}
	uid := target.SandboxUID.For(id) // its own of the range; run leases it or the next free one
	l.owner = &compute.HostUser{UID: uid, GID: uid}
	l.disk = int64(target.Disk)
	return l
}

func stageAt(stateDir, id string) *stage {
	dir := filepath.Join(stateDir, id)
	return &stage{
		dir: dir, bundle: filepath.Join(dir, wire.BundleDir), workspace: filepath.Join(dir, wire.WorkspaceDir),
		out: filepath.Join(dir, wire.OutDir), stdout: filepath.Join(dir, stdoutLog), stderr: filepath.Join(dir, stderrLog),
		disk: filepath.Join(dir, diskDir), held: filepath.Join(stateDir, heldDir, id),
		capFiles: filepath.Join(dir, wire.CapabilityFilesDir), pinned: filepath.Join(dir, pinnedDir),
	}
}

// hold enters the stage in the held index. It fails closed: work nobody could find after a
// crash is not staged.
func (s *stage) hold() error {
	if err := os.MkdirAll(filepath.Dir(s.held), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(s.held, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// heldStages lists the dispatches whose stage is in the held index under stateDir. Entries
// whose name is no dispatch id are skipped: only hold writes there.
func heldStages(stateDir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(stateDir, heldDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list held stages: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if id, err := ulid.ParseStrict(e.Name()); err == nil && id.String() == e.Name() && e.Type().IsRegular() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// newStageFrom makes the dispatch's stage; with pre, its bundle, workspace, out directory,
// capability files and quota are the warm slot's (made at fill, empty, root's), and only the
// stage directory (logs, phase, inputs, gateway) is the dispatch's own: nothing is mounted.
func newStageFrom(stateDir, id string, l stageLimits, pre *prestaged) (*stage, error) {
	s := stageAt(stateDir, id)
	s.disk, s.pinned, s.owner, s.sandboxed, s.podFiles = "", "", l.owner, l.sandboxed, l.podFiles
	if err := s.hold(); err != nil {
		return nil, fmt.Errorf("stage dispatch %s: %w", id, err)
	}
	if pre != nil {
		s.bundle, s.workspace, s.out, s.capFiles, s.release = pre.bundle, pre.workspace, pre.out, pre.capFiles, pre.release
		if pre.disk != "" {
			s.disk, s.diskSize = pre.disk, l.disk
		}
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			s.removeWork()
			return nil, fmt.Errorf("stage dispatch %s: %w", id, err)
		}
		// The slot made its directories the sandbox uid's (its command starts in one); the
		// host fills them as a cold stage's, its own until handOver gives them to the sandbox
		// again (git, as root, refuses to check a repository out into a workspace another
		// user owns, and the warm dispatch would fail where the cold one runs).
		// Only the slot's command, blocked on its claim pipe, runs as that uid meanwhile.
		for _, p := range []string{s.bundle, s.workspace, s.out, s.capFiles} {
			if err := os.Lchown(p, os.Geteuid(), os.Getegid()); err != nil {
				s.removeWork()
				return nil, fmt.Errorf("stage dispatch %s: %w", id, err)
			}
		}
		return s, nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		s.removeWork()
		return nil, fmt.Errorf("stage dispatch %s: %w", id, err)
	}
	if l.disk > 0 {
		disk := filepath.Join(s.dir, diskDir)
		if err := mountQuota(disk, id, l.disk); err == nil {
			s.disk, s.diskSize = disk, l.disk
			s.workspace, s.out = filepath.Join(disk, wire.WorkspaceDir), filepath.Join(disk, wire.OutDir)
			if l.pinned {
				s.mountPinned(id)
			}
		}
		// Else nothing here can mount (a container without CAP_SYS_ADMIN, say): the
		// dispatch runs as an unprivileged agora's would, and its isolation says
		// disk-unenforced. `agora doctor` tells why.
	}
	if err := os.Mkdir(s.bundle, 0o700); err != nil {
		s.removeWork()
		return nil, fmt.Errorf("stage dispatch %s: %w", id, err)
	}
	if err := os.MkdirAll(s.out, 0o700); err != nil {
		s.removeWork()
		return nil, fmt.Errorf("stage dispatch %s: %w", id, err)
	}
	return s, nil
}

// makeFilesBeside starts makeFiles with the stage's first phase; madeFiles waits for it.
func (s *stage) makeFilesBeside(phase string) {
	s.making = new(sync.WaitGroup)
	s.making.Go(func() { s.makeFiles(phase) })
}

func (s *stage) madeFiles() {
	if s.making != nil {
		s.making.Wait()
	}
}

// makeFiles makes the files the supervisor writes in the stage directory: the phase file,
// holding phase (setPhase's own), and the logs, empty, which it keeps open for takeLogs. It
// runs while the rest of the staging does (stage): a new file of the state directory's file
// system costs a tenth of a millisecond or more (ext4 without a journal scans past recently
// deleted inodes) that the dispatch need not wait for. O_EXCL: a name taken already is left
// to setPhase and takeLogs, which never write into a file they did not make. setPhase,
// takeLogs and removeWork wait for it (madeFiles).
func (s *stage) makeFiles(phase string) {
	s.setPhaseNow(phase)
	for i, p := range []string{s.stdout, s.stderr} {
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600); err == nil {
			s.logs[i] = f
		}
	}
}

// takeLogs returns the stage's stdout and stderr log files, new and empty: the ones makeFiles
// made, or made now ([createLog]) where it made none.
func (s *stage) takeLogs() (stdout, stderr *os.File, err error) {
	s.madeFiles()
	for i, p := range []string{s.stdout, s.stderr} {
		if s.logs[i] == nil {
			if s.logs[i], err = createLog(p); err != nil {
				s.closeLogs()
				return nil, nil, err
			}
		}
	}
	stdout, stderr = s.logs[0], s.logs[1]
	s.logs = [2]*os.File{}
	return stdout, stderr, nil
}

// closeLogs closes the log files makeFiles made that nothing took.
func (s *stage) closeLogs() {
	for i, f := range s.logs {
		if f != nil {
			f.Close()
			s.logs[i] = nil
		}
	}
}

// mountPinned mounts the pinned content's tmpfs (see pinnedDir) and places the bundle and
// the capability files on it. A tmpfs that does not mount leaves them beside it, where they
// work the same, only slower to make and delete.
func (s *stage) mountPinned(id string) {
	dir := filepath.Join(s.dir, pinnedDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=0,gid=0", pinnedTmpfsSize, pinnedTmpfsFiles)
	if err := unix.Mount("agora-pinned-"+id, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		os.Remove(dir)
		return
	}
	s.pinned = dir
	s.bundle, s.capFiles = filepath.Join(dir, wire.BundleDir), filepath.Join(dir, wire.CapabilityFilesDir)
}

// mountQuota mounts a tmpfs of size bytes at dir for dispatch id. Its root is 0700 root; the
// inode count is capped too (one per 16 KiB, at least 4096), since inodes cost kernel memory
// that size does not count. nosuid and nodev: nothing the agent leaves there gains rights.
func mountQuota(dir, id string, size int64) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	inodes := max(size/(16<<10), 4096)
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=0,gid=0", size, inodes)
	if err := unix.Mount("agora-"+id, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		os.Remove(dir)
		return fmt.Errorf("mount the disk quota on %s: %w", dir, err)
	}
	return nil
}

// checkRunnable refuses, before anything starts, a binary the sandbox user could not run:
// bwrap would fail inside with a bare "permission denied".
func (s *stage) checkRunnable(wb *wire.RuntimeBinary) error {
	if s.owner == nil || wb == nil {
		return nil
	}
	bin := wb.HostPath
	fi, err := os.Stat(bin)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o005 != 0o005 {
		return fmt.Errorf("the worker binary %s (mode %v) is not readable and executable by others, "+
			"and sandboxes run as uid %d: chmod 0755 it", bin, fi.Mode().Perm(), s.owner.UID)
	}
	return nil
}

// handOver gives the sandbox user the trees at paths (no symlink is followed: links are
// re-owned themselves). Nothing of the sandbox runs yet and the trees sit in the stage
// directory, which only root can enter, so nobody can swap a path while it is walked.
func (s *stage) handOver(paths ...string) error {
	if s.owner == nil {
		return nil
	}
	uid, gid := int(s.owner.UID), int(s.owner.GID)
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hand the stage to the sandbox uid %d: %w", uid, err)
		}
	}
	return nil
}

// isolation appends to what the provider enforced the stage's own share: the disk quota, or
// the word that there is none. `sandbox: none` stays exactly "none". A pod's files are its
// own (podFiles): its workspace is an emptyDir the kubelet evicts past its sizeLimit when it
// next looks, not a quota that refuses the write, so its record says disk-unenforced even
// when the stage's copy sits on a quota.
func (s *stage) isolation(provider string) string {
	switch {
	case !s.sandboxed || provider == "":
		return provider
	case s.disk != "" && !s.podFiles:
		return provider + "+disk-quota"
	}
	return provider + "+disk-unenforced"
}

// diskExceeded says why the dispatch's disk quota is full, or "" when it is not (or there is
// none). A full tmpfs is what a filler leaves: its writes failed with ENOSPC at the quota.
func (s *stage) diskExceeded(target string) string {
	if s.disk == "" {
		return ""
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.disk, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return ""
	}
	switch {
	case st.Bavail == 0:
		return quotaDetail(config.ByteSize(s.diskSize).String(), target)
	case st.Ffree == 0:
		return quotaDetail(fmt.Sprintf("%d files", st.Files), target)
	}
	return ""
}

// errNoSpace marks a staging step that ran out of room on the disk quota.
var errNoSpace = errors.New("no space left on the disk quota")

// cloneExceeded says why a failed checkout (err from prepareWorkspace) is the quota's doing,
// or "". A failed clone removes what it wrote, so the tmpfs is not left full: git's own
// ENOSPC message (under LANG=C) is the evidence.
func (s *stage) cloneExceeded(err error, target string) string {
	if s.disk != "" && errors.Is(err, errNoSpace) {
		return quotaDetail(config.ByteSize(s.diskSize).String(), target)
	}
	return s.diskExceeded(target)
}

func quotaDetail(what, target string) string {
	return fmt.Sprintf("disk quota exceeded: the workspace and out directory filled all %s allowed "+
		"(targets.%s.disk in agora.yaml)", what, target)
}

// removeWork unmounts the disk quota and deletes everything but the logs (the phase file too), which `dispatch
// logs -f` may still be reading, then takes the stage out of the held index. The unmount is
// lazy: a reader still holding a file open keeps its pages until it closes it, but the
// mount is gone at once. A gateway directory outside the stage (see startGateway) goes too.
func (s *stage) removeWork() {
	s.madeFiles()
	s.closeLogs()
	s.closePhase()
	unmounted := true
	if s.pinned != "" {
		// EINVAL, ENOENT: no tmpfs there (a reaped stage that had none, or ext4's layout).
		err := unix.Unmount(s.pinned, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		unmounted = err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT)
		os.RemoveAll(s.pinned)
	}
	if s.release != nil {
		// A warm slot's stage: the slot's teardown takes it (the caller calls release, in
		// the background: its unmount waits out an RCU grace period).
	} else if s.disk != "" {
		// EINVAL: not a mount point (a reaped stage whose supervisor never mounted one).
		err := unix.Unmount(s.disk, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		unmounted = unmounted && (err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT))
		os.RemoveAll(s.disk)
	}
	if s.release == nil {
		os.RemoveAll(s.bundle)
		os.RemoveAll(s.workspace)
		os.RemoveAll(s.out)
		s.removeCapabilityFiles()
	}
	os.RemoveAll(filepath.Join(s.dir, bundleStaging))
	os.RemoveAll(filepath.Join(s.dir, bundleDiscard))
	os.RemoveAll(filepath.Join(s.dir, wire.InputsDir))
	os.RemoveAll(filepath.Join(s.dir, gateDir)) // the verify gate's tree without a disk quota
	os.RemoveAll(filepath.Join(s.dir, gateGitDir))
	os.Remove(filepath.Join(s.dir, gateIndex))
	os.RemoveAll(filepath.Join(s.dir, stackGitDir)) // a stack's build, when staging stopped in it
	os.Remove(filepath.Join(s.dir, stackIndex))
	os.Remove(filepath.Join(s.dir, phaseFile)) // the dispatch's record says how it ended
	os.Remove(filepath.Join(s.dir, "."+phaseFile))
	os.Remove(filepath.Join(s.dir, orphanMark))
	os.Remove(filepath.Join(s.dir, adoptionsMark))
	removeGatewayEntry(filepath.Join(s.dir, wire.GatewayDir))
	if unmounted {
		// Else the entry stays, and the next Reap tries again.
		os.Remove(s.held)
	}
}

// pinned is what the worker needs, derived only from the record's pinned digests.
type pinned struct {
	subagent     catalog.Version
	doc          catalog.SubagentDoc
	capabilities []catalog.Version
	env          map[string]string
	secretRefs   map[string]string          // key -> sealed ref
	bindings     map[string]catalog.Binding // secret key -> the hosts its value may go to
	input        []byte
	// runtimeBinary is the host CLI run resolved for this run (not pinned at accept time:
	// what is recorded is what the sandbox runs).
	runtimeBinary *wire.RuntimeBinary
}

// fitsPinnedTmpfs says whether p's content goes on the pinned tmpfs: at most
// maxPinnedOnTmpfs stored (the subagent's and its capabilities' sizes as the catalog recorded
// them, which their digests fix) and at most pinnedTmpfsFiles files and directories staged.
func (d *Dispatcher) fitsPinnedTmpfs(p *pinned) bool {
	n := p.subagent.Size
	for _, c := range p.capabilities {
		n += c.Size
	}
	return n <= maxPinnedOnTmpfs && d.pinnedFilesFit(p)
}

// loadPinned rebuilds the dispatch's inputs from its record. Every digest is pinned, so a
// supervisor started later (--detach) or elsewhere sees exactly what was accepted.
func (d *Dispatcher) loadPinned(ctx context.Context, r *Record) (*pinned, error) {
	sub, err := d.Catalog.Resolve(ctx, catalog.KindSubagent, r.Subagent+"@"+string(r.SubagentDigest))
	if err != nil {
		return nil, err
	}
	content, err := d.Catalog.Content(sub)
	if err != nil {
		return nil, err
	}
	doc, err := catalog.ParseSubagentDoc(content)
	if err != nil {
		return nil, err
	}
	p := &pinned{subagent: sub, doc: doc, env: map[string]string{}, secretRefs: map[string]string{}, bindings: map[string]catalog.Binding{}}
	for _, pin := range doc.Capabilities {
		v, err := d.Catalog.Resolve(ctx, catalog.KindCapability, pin.Name+"@"+string(pin.Digest))
		if err != nil {
			return nil, err
		}
		p.capabilities = append(p.capabilities, v)
	}
	for _, e := range r.Envs {
		v, err := d.Catalog.Resolve(ctx, catalog.KindEnv, e.Name+"@"+string(e.Digest))
		if err != nil {
			return nil, err
		}
		b, err := d.Catalog.Content(v)
		if err != nil {
			return nil, err
		}
		ed, err := catalog.ParseEnvDoc(b)
		if err != nil {
			return nil, err
		}
		// A later bundle's key wins, whether value or secret.
		for k, val := range ed.Values {
			p.env[k] = val
			delete(p.secretRefs, k)
			delete(p.bindings, k)
		}
		for k, ref := range ed.Secrets {
			p.secretRefs[k] = ref
			delete(p.env, k)
			delete(p.bindings, k)
			if b, ok := ed.Bindings[k]; ok {
				p.bindings[k] = b
			}
		}
	}
	if p.input, err = d.Blobs.Get(r.InputDigest, wire.MaxInputJSON); err != nil {
		return nil, err
	}
	return p, nil
}

// writeBundle writes the dispatch's manifest.json into its bundle directory, and the pinned
// content into the shared entry of its content digest (sandboxes run as the invoking user)
// or beside the manifest (a root agora's sandbox uids, `sandbox: none`): see bundles.go.
func (d *Dispatcher) writeBundle(r *Record, p *pinned, s *stage, agentTimeout, setupTimeout int, approvalTimeout time.Duration) error {
	m := wire.Manifest{
		Version:    wire.ManifestVersion,
		DispatchID: r.ID,
		Subagent:   wire.Bundle{Name: p.subagent.Name, Digest: p.subagent.Digest, Path: wire.SubagentFile},
		Runtime:    p.doc.Runtime,
		Command:    p.doc.Command,
		InputJSON:  string(p.input),
		Env:        p.env,
		SecretKeys: catalog.SortedKeys(p.secretRefs),

		AgentTimeoutSeconds: agentTimeout,
		SetupTimeoutSeconds: setupTimeout,
		// Every isolated sandbox has its own PID namespace; `sandbox: none` shares the host's.
		PIDNamespace: r.Sandbox != "none",
		Network:      manifestNetwork(r.Network),
		// Resolved on the host by run, bound read-only at its Path.
		RuntimeBinary: p.runtimeBinary,
		Learn:         r.Learn,
	}
	var declared wire.Grants
	for _, c := range p.capabilities {
		m.Capabilities = append(m.Capabilities, wire.Bundle{Name: c.Name, Digest: c.Digest, Path: wire.CapabilityPath(c.Digest)})
		if g := c.Meta.CapabilityDoc; g != nil {
			declared.Commands = append(declared.Commands, g.Commands...)
			declared.Tools = append(declared.Tools, g.Tools...)
			declared.Egress = append(declared.Egress, g.Egress...)
			declared.Approve = append(declared.Approve, g.Approve...)
		}
	}
	declared.Approve = grant.NormalApprove(declared.Approve)
	declared.Commands, declared.Tools, declared.Egress = uniq(declared.Commands), uniq(declared.Tools), uniqRules(declared.Egress)
	m.Grants = declared
	if g := r.Grants; g != nil {
		// The dispatch's grant, narrowed at accept time from exactly these capabilities.
		m.Grants = wire.Grants{
			Commands: manifestCommands(declared.Commands, g.Commands),
			Tools:    uniq(g.Tools),
			Egress:   uniqRules(g.Egress),
			Approve:  g.Approve,
		}
	}
	if len(m.Grants.Approve) > 0 {
		m.ApprovalTimeoutSeconds = int(approvalTimeout.Round(time.Second) / time.Second)
	}
	for _, in := range r.Inputs {
		if in.Apply {
			m.BasePatch = in.Key + "/" + PatchFile
		}
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	files := bundleVersions(p)
	if s.sandboxed && s.owner == nil {
		if s.shared, err = d.shareBundle(s, files); err != nil {
			return err
		}
	} else if err := d.writeOwnBundle(s.bundle, files); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.bundle, wire.ManifestFile), b, 0o600)
}

// writeOwnBundle writes files into the stage's own bundle directory.
func (d *Dispatcher) writeOwnBundle(dir string, files []bundleFile) error {
	if err := os.Mkdir(filepath.Join(dir, wire.CapabilitiesDir), 0o700); err != nil {
		return err
	}
	for _, f := range files {
		data, err := d.Catalog.Content(f.version)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.rel), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func uniq(ss []string) []string {
	set := map[string]bool{}
	out := []string{}
	for _, s := range ss {
		if !set[s] {
			set[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// prepareWorkspace checks the pinned revision out into the workspace, or makes it empty.
// The workspace's .git holds the pinned commit's history and nothing else: a new repository
// fetches that one commit (with what it reaches) from the source, so no other branch, tag,
// or object no ref reaches is in the sandbox, where the agent could read it with git
// cat-file whatever the workspace's allow-list says (a clone copies every
// object of the source). Protocol v2 lets a commit no ref names be fetched by its id; fetch
// never shares the source's object files, which the worker can write.
//
// A stacked dispatch's workspace (stack.go) is its stacked base instead: the stack's commits
// on the pinned commit, checked out at the last; without a repository, the stack's files.
func prepareWorkspace(ctx context.Context, r *Record, s *stage, stack []stackPatch) error {
	if r.Repo == "" {
		if err := os.MkdirAll(s.workspace, 0o700); err != nil || len(stack) == 0 {
			return err
		}
		return stackFiles(ctx, r, s, stack)
	}
	if s.release != nil {
		// A warm slot's workspace, made at fill (0700): the mode git init gives the directory
		// it makes for a cold stage, so the agent sees the cold one's.
		if err := chmodAsMkdir(s.workspace, filepath.Join(s.dir, ".mode")); err != nil {
			return err
		}
	}
	if err := fetchPinned(ctx, r, s); err != nil {
		return err
	}
	if len(stack) > 0 {
		if err := stackWorkspace(ctx, r, s, stack); err != nil {
			return err
		}
	} else if out, err := gitCmd(ctx, s.workspace, "checkout", "--quiet", "--detach", r.Revision).CombinedOutput(); err != nil {
		return s.gitError("check out "+r.Revision, out)
	}
	return scrubGitDir(s, r.Repo)
}

// chmodAsMkdir gives dir the mode a directory made now with mkdir(2) and 0777 gets (the
// process's umask applied), as git init makes one: probe, a path free in a directory of the
// host's own, is made and removed to learn it.
func chmodAsMkdir(dir, probe string) error {
	os.Remove(probe) // one a crash left between the two
	if err := os.Mkdir(probe, 0o777); err != nil {
		return err
	}
	fi, err := os.Lstat(probe)
	os.Remove(probe)
	if err != nil {
		return err
	}
	return os.Chmod(dir, fi.Mode().Perm())
}

// fetchPinned makes s.workspace a new repository holding the pinned commit's history and
// nothing else (see prepareWorkspace); nothing is checked out.
func fetchPinned(ctx context.Context, r *Record, s *stage) error {
	if out, err := gitCmd(ctx, s.dir, "init", "--quiet", "--", s.workspace).CombinedOutput(); err != nil {
		return s.gitError("initialise the workspace", out)
	}
	if out, err := gitCmd(ctx, s.workspace, "-c", "protocol.version=2", "fetch", "--quiet", "--no-tags",
		"--no-write-fetch-head", "--no-recurse-submodules", "--", r.Repo, r.Revision).CombinedOutput(); err != nil {
		return s.gitError("fetch "+r.Revision+" from "+r.Repo, out)
	}
	return nil
}

// scrubGitDir leaves the checkout's.git naming no host path: the
// fetch names the source nowhere but in logs and FETCH_HEAD (neither is written, but a git
// that wrote them would be caught here), which go. The .git stays, so git works in the
// sandbox, with the checkout's history and no remote. Then every file outside objects/ is
// read back, and a .git that still names the path is refused rather than handed over.
func scrubGitDir(s *stage, repo string) error {
	dotGit := filepath.Join(s.workspace, ".git")
	for _, name := range []string{"logs", "FETCH_HEAD", "ORIG_HEAD", filepath.Join("objects", "info", "alternates")} {
		if err := os.RemoveAll(filepath.Join(dotGit, name)); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dotGit, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() && p == filepath.Join(dotGit, "objects") {
			return fs.SkipDir
		}
		if !de.Type().IsRegular() || p == filepath.Join(dotGit, "index") { // the index: the checkout's own paths
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if namesPath(b, repo) {
			rel, _ := filepath.Rel(s.workspace, p)
			return fmt.Errorf("the checkout's %s names the repository's host path after scrubbing; refusing to hand it to the sandbox", rel)
		}
		return nil
	})
}

// namesPath reports whether b holds path as a path of its own: starting b, or after a byte
// that cannot be part of a path before it (a blank, a quote, = or :). A ref such as
// refs/heads/lib/src does not name the repository /src.
func namesPath(b []byte, path string) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(path))
		if j < 0 {
			return false
		}
		at := i + j
		if at == 0 || bytes.IndexByte([]byte(" \t\n\r\"'=:"), b[at-1]) >= 0 {
			return true
		}
		i = at + 1
	}
}

// gitError words a failed git step, marked [errNoSpace] when it ran out of the quota's room.
func (s *stage) gitError(step string, out []byte) error {
	msg := strings.TrimSpace(string(out))
	if s.disk != "" && strings.Contains(msg, "No space left on device") {
		return fmt.Errorf("%s: %s: %w", step, msg, errNoSpace)
	}
	return fmt.Errorf("%s: %s", step, msg)
}

// lstatOK reports whether a stage's directory (AGORA_HOME/dispatches/ID, the host's) names
// anything: prepare asks it of an accepted dispatch's stage a dead supervisor may have left.
func lstatOK(stageDir string) bool {
	_, err := os.Lstat(stageDir)
	return err == nil
}
