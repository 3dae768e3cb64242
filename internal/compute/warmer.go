package compute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
)

// A warm slot is a sandbox a provider starts before the dispatch that will run in it is
// known. The provider owns the slot's whole life behind a [Warmer]: what it starts, what it
// keeps on the host or in the cluster for it, how a claim reaches it and how what a dead
// holder left is swept. The caller (the dispatch) owns what is a dispatch's: the template a
// target's slots are filled from, the uid a slot runs as, the record. The provider-neutral
// pool (package compute/warm) keeps a target's slots ready, hands each to one claim and counts.

// ErrSlotShape means a spec does not fit a warm slot: it must start cold.
var ErrSlotShape = errors.New("spec does not match the warm slot's shape")

// WarmProvider is a provider that can start sandboxes ahead of their dispatch.
type WarmProvider interface {
	// Warmer returns the warmer of one target's slots, which keeps what it needs on the
	// host under o.Dir.
	Warmer(o WarmOptions) (Warmer, error)
}

// Warmer fills, runs dispatches in, and reaps one target's warm slots.
type Warmer interface {
	// Shape is the key of template s (its RunAs unset): the pool holds a target's slots under
	// it, and a dispatch of the target claims by it.
	Shape(s Spec) string
	// Fill starts one slot of tmpl (its ID is ignored), as tmpl.RunAs when set: a slot filled
	// as a uid runs only a spec run as that uid.
	Fill(ctx context.Context, tmpl Spec) (WarmSlot, error)
	// Run runs s in slot, which the caller MUST hold alone (claimed out of its pool). The slot
	// is spent whatever happens: it MUST refuse a second Run. commit is called as
	// [ReleaseCommitter] says, or never. An error wrapping [ErrSlotShape], or any error while
	// commit has not run, means nothing of s ran: the caller may start s cold.
	Run(ctx context.Context, slot WarmSlot, s Spec, commit func(taskID string) error) (Handle, error)
	// Reap kills and removes what holders that died left of this warmer's slots. A living
	// holder's slots, ready or running a claim, MUST be left.
	Reap(ctx context.Context) error
}

// WarmSlot is one sandbox a [Warmer] started ahead. It implements the pool's Slot.
type WarmSlot interface {
	// Shape is the slot's own key, as its provider computes it from the template it was
	// filled from.
	Shape() string
	// Alive says whether the slot's sandbox still waits for its claim.
	Alive() bool
	// Discard kills a slot never run and removes what it holds. Called at most once.
	Discard()
}

// ReleaseCommitter is a [WarmSlot] that holds its sandbox back until the caller's record is
// committed (a bubblewrap slot: bwrap waits on its block descriptor). Its Run calls commit
// once, with the task id, when everything of the claim is in place and before anything of it
// runs: an error from commit kills the slot, nothing having run, and Run returns it. Run of
// any other slot never calls commit; its caller records what runs before Run and the start
// after it, as a cold start's.
type ReleaseCommitter interface {
	CommitsBeforeRelease() bool
}

// StageTaker is a [WarmSlot] that made its dispatch's stage directories ahead
// ([WarmOptions.Stage]). TakeStage hands them out once; release lets go of the caller's hold
// on them, after which the slot removes them with its own directory.
type StageTaker interface {
	TakeStage() (st Staged, release func(), ok bool)
}

// WarmOptions say how a target's slots are laid out beyond their template.
type WarmOptions struct {
	// Dir is the root under which the slots keep their host directories (0700, root's): one
	// root per target, swept by [Warmer.Reap] when a holder starts.
	Dir string
	// ClaimRoot is the directory inside the sandbox the claim's binds live under
	// (wire.DefaultRoot, "/agora"). A bind of the template outside it is part of the shape
	// (its source must be the same at claim); one under it is supplied at claim.
	ClaimRoot string
	// PerDispatchEnv names environment variables a claim may set to any value: they are not
	// part of the shape and the slot's sandbox does not have them (bwrap's environment is
	// fixed when it starts). Only names the worker itself never reads belong here.
	PerDispatchEnv []string
	// PrestartEnv, when set, starts the slot's command at fill instead of at claim (the slot is
	// prewarmed): the command execs, under the slot's limits, in its cgroup and namespaces, with
	// the read end of a pipe at the descriptor this variable names, and must wait for one byte
	// there before it touches anything under the claim root (EOF: the slot was discarded or
	// its holder died; it exits). Only a command that honours that contract (the worker:
	// wire.ClaimFDEnv) may run prestarted.
	PrestartEnv string
	// ClaimFiles are places outside ClaimRoot whose file comes at claim: a read-only bind of
	// one in the template binds a file of the slot's own there, filled at the claim with the
	// claim's source; the place is part of the shape, the source is not.
	ClaimFiles []string
	// Stage, with PrestartEnv, makes the claim's directories at fill: a template whose claim
	// binds it serves is staged ahead, any other is attached at claim.
	Stage *SlotStage
	// Log receives what a warmer's background work has to say (a holder's slot gateway);
	// nil discards it.
	Log *slog.Logger
}

// SlotStage is the layout of a slot's stage, made at fill.
type SlotStage struct {
	// Dirs maps each claim place the stage serves (a bind's Dst under the claim root) to its
	// directory, relative to the stage. A template with any other bind under the claim root
	// (but the command's own binary) is not staged ahead: its claim attaches as before.
	Dirs map[string]string
	// Quota, when not "", is the directory (relative to the stage) Mount is called on before
	// any of Dirs is made: the disk quota the dispatch's directories live on.
	Quota string
	Mount func(dir string) error
}

// Staged is a taken stage: where each claim place's directory is on the host.
type Staged struct {
	// Root is the stage's directory; Dirs its directories by claim place.
	Root string
	Dirs map[string]string
}

// SlotShape is the key a spec must share with a slot laid out by o to run in it: everything
// the slot's sandbox fixes when it starts (its command, environment but o.PerDispatchEnv,
// limits, network, the binds outside the claim root), and of the claim's binds and claim
// files only their places.
func SlotShape(s Spec, o WarmOptions) string {
	h := sha256.New()
	w := func(parts ...string) {
		for _, p := range parts {
			io.WriteString(h, strconv.Quote(p))
		}
		io.WriteString(h, "\n")
	}
	w("sandbox", s.Sandbox, "dir", s.Dir, "net", strconv.FormatBool(s.Network), "files", strconv.Itoa(len(s.Files)))
	w(append([]string{"argv"}, s.Argv...)...)
	w(append([]string{"env"}, o.ShapeEnv(s.Env)...)...)
	l := s.Limits
	w("limits", l.Timeout.String(), strconv.Itoa(l.MaxProcs), strconv.FormatInt(l.FileSize, 10), strconv.FormatInt(l.Memory, 10), strconv.FormatInt(l.Scratch, 10), strconv.FormatInt(l.Disk, 10))
	if s.RunAs != nil {
		w("runas", strconv.FormatUint(uint64(s.RunAs.UID), 10), strconv.FormatUint(uint64(s.RunAs.GID), 10))
	}
	for _, b := range s.Binds {
		switch {
		case o.UnderClaimRoot(b.Dst):
			w("claim", b.Dst, strconv.FormatBool(b.Writable), strconv.FormatBool(b.Result))
		case o.IsClaimFile(b):
			w("claimfile", b.Dst)
		default:
			w("fixed", b.Src, b.Dst, strconv.FormatBool(b.Writable), strconv.FormatBool(b.Result))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ShapeEnv is env without the variables o lets a claim set.
func (o WarmOptions) ShapeEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(o.PerDispatchEnv, k) {
			out = append(out, kv)
		}
	}
	return out
}

// UnderClaimRoot says whether p (a path in the sandbox) is the claim root or below it.
func (o WarmOptions) UnderClaimRoot(p string) bool {
	return o.ClaimRoot != "" && (p == o.ClaimRoot || strings.HasPrefix(p, o.ClaimRoot+"/"))
}

// IsClaimFile says whether b is a read-only bind at one of o's claim file places.
func (o WarmOptions) IsClaimFile(b Bind) bool {
	return !b.Writable && !b.Result && !o.UnderClaimRoot(b.Dst) && slices.Contains(o.ClaimFiles, b.Dst)
}
