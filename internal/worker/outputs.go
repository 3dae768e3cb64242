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
)

// errOutputsFull stops the walk of outputs/ at a limit.
var errOutputsFull = errors.New("outputs full")

// outputs lists the regular files under out/outputs/ with their size and SHA-256. Nothing is
// followed: symlinks (the directory itself included), FIFOs, sockets and devices are skipped
// and listed in Result.OutputsSkipped, as are names that are not printable UTF-8. More than
// MaxOutputs files or MaxOutputsSize bytes fails the dispatch; what fit is still listed.
func (r *runner) outputs(ctx context.Context) *failure {
	base := filepath.Join(r.out, OutputsDir)
	fi, err := os.Lstat(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fail(ReasonWorkerFailed, "outputs: %v", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		r.skip(".", skipSymlink)
		return nil
	case !fi.IsDir():
		r.skip(".", skipNotRegular)
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
		case !printable(rel):
			r.skip(rel, skipUnprintable)
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			r.skip(rel, skipSymlink)
			return nil
		case !d.Type().IsRegular():
			r.skip(rel, skipNotRegular)
			return nil
		}
		if len(r.res.Outputs) == MaxOutputs {
			over = fail(ReasonWorkerFailed, "outputs: more than %d files under %s/", MaxOutputs, OutputsDir)
			return errOutputsFull
		}
		info, ok, err := hashRegular(p, MaxOutputsSize-total)
		switch {
		case err != nil:
			return err
		case !ok:
			r.skip(rel, skipNotRegular)
			return nil
		case info.Size+total > MaxOutputsSize:
			over = fail(ReasonWorkerFailed, "outputs: more than %d bytes under %s/", MaxOutputsSize, OutputsDir)
			return errOutputsFull
		}
		total += info.Size
		info.Path = OutputsDir + "/" + rel
		if names += len(info.Path); names > MaxOutputNames {
			over = fail(ReasonWorkerFailed, "outputs: the names under %s/ are over %d bytes in all", OutputsDir, MaxOutputNames)
			return errOutputsFull
		}
		r.res.Outputs = append(r.res.Outputs, info)
		return nil
	})
	slices.SortFunc(r.res.Outputs, func(a, b OutputInfo) int { return strings.Compare(a.Path, b.Path) })
	if over != nil {
		return over
	}
	if err != nil {
		return fail(ReasonWorkerFailed, "outputs: %v", err)
	}
	return nil
}

// skip records an entry of outputs/ that was not collected.
func (r *runner) skip(rel, why string) {
	if len(r.res.OutputsSkipped) >= maxSkipped {
		return
	}
	if !printable(rel) || len(rel) > maxOutputPath {
		rel = strconv.QuoteToASCII(truncate(rel, maxOutputPath))
	}
	r.res.OutputsSkipped = append(r.res.OutputsSkipped, SkippedOutput{Path: OutputsDir + "/" + rel, Why: why})
}

// hashRegular opens p without following a symlink or blocking on a FIFO and, when it is a
// regular file with one link of at most limit bytes, returns its size and SHA-256. ok is
// false for anything else (the host's reader, package sandboxfs, refuses the same). A file over limit returns a size over limit.
func hashRegular(p string, limit int64) (info OutputInfo, ok bool, err error) {
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
		return OutputInfo{Size: fi.Size()}, true, nil
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, limit+1))
	if err != nil {
		return info, false, fmt.Errorf("read %s: %w", filepath.Base(p), err)
	}
	return OutputInfo{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, true, nil
}
