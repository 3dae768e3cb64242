package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// errOutputsFull stops the walk of outputs/ at a limit.
var errOutputsFull = errors.New("outputs full")

// outputs lists the regular files under out/outputs/ with their size and SHA-256. Nothing is
// followed: symlinks (the directory itself included), FIFOs, sockets and devices are skipped
// and listed in Result.OutputsSkipped, as are names that are not wire.Printable UTF-8. More than
// MaxOutputs files or MaxOutputsSize bytes fails the dispatch; what fit is still listed.
func (r *runner) outputs(ctx context.Context) *failure {
	base := filepath.Join(r.out, wire.OutputsDir)
	fi, err := os.Lstat(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fail(lifecycle.ReasonWorkerFailed, "outputs: %v", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		r.skip(".", wire.SkipSymlink)
		return nil
	case !fi.IsDir():
		r.skip(".", wire.SkipNotRegular)
		return nil
	}
	var total int64
	names := 0
	var over *failure
	err = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		switch {
		case !wire.Printable(rel):
			r.skip(rel, wire.SkipUnprintable)
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			r.skip(rel, wire.SkipSymlink)
			return nil
		case !d.Type().IsRegular():
			r.skip(rel, wire.SkipNotRegular)
			return nil
		}
		if len(r.res.Outputs) == wire.MaxOutputs {
			over = fail(lifecycle.ReasonWorkerFailed, "outputs: more than %d files under %s/", wire.MaxOutputs, wire.OutputsDir)
			return errOutputsFull
		}
		info, ok, err := hashRegular(p, wire.MaxOutputsSize-total)
		switch {
		case err != nil:
			return err
		case !ok:
			r.skip(rel, wire.SkipNotRegular)
			return nil
		case info.Size+total > wire.MaxOutputsSize:
			over = fail(lifecycle.ReasonWorkerFailed, "outputs: more than %d bytes under %s/", wire.MaxOutputsSize, wire.OutputsDir)
			return errOutputsFull
		}
		total += info.Size
		info.Path = wire.OutputsDir + "/" + rel
		if names += len(info.Path); names > wire.MaxOutputNames {
			over = fail(lifecycle.ReasonWorkerFailed, "outputs: the names under %s/ are over %d bytes in all", wire.OutputsDir, wire.MaxOutputNames)
			return errOutputsFull
		}
		r.res.Outputs = append(r.res.Outputs, info)
		return nil
	})
	slices.SortFunc(r.res.Outputs, func(a, b wire.OutputInfo) int { return strings.Compare(a.Path, b.Path) })
	if over != nil {
		return over
	}
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "outputs: %v", err)
	}
	return nil
}

// skip records an entry of outputs/ that was not collected.
func (r *runner) skip(rel, why string) {
	if len(r.res.OutputsSkipped) >= wire.MaxSkipped {
		return
	}
	if !wire.Printable(rel) || len(rel) > wire.MaxOutputPath {
		rel = strconv.QuoteToASCII(agentrun.Truncate(rel, wire.MaxOutputPath))
	}
	r.res.OutputsSkipped = append(r.res.OutputsSkipped, wire.SkippedOutput{Path: wire.OutputsDir + "/" + rel, Why: why})
}

// hashRegular opens p without following a symlink or blocking on a FIFO and, when it is a
// regular file with one link of at most limit bytes, returns its size and SHA-256. ok is
// false for anything else (the host's reader, package sandboxfs, refuses the same). A file over limit returns a size over limit.
func hashRegular(p string, limit int64) (info wire.OutputInfo, ok bool, err error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return info, false, nil
	}
	if err != nil {
		return info, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return info, false, err
	}
	if !fi.Mode().IsRegular() {
		return info, false, nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Nlink != 1 {
		// A second name could be anywhere the agent can write; the host refuses it too.
		return info, false, nil
	}
	if fi.Size() > limit {
		return wire.OutputInfo{Size: fi.Size()}, true, nil
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, limit+1))
	if err != nil {
		return info, false, fmt.Errorf("read %s: %w", filepath.Base(p), err)
	}
	return wire.OutputInfo{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, true, nil
}
