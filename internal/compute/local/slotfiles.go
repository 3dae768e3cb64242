package local

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// A slot's claim files (proxy dispatches). A dispatch with the egress proxy binds its
// stage's trust file over the system trust store, outside the claim root: as a bind of the
// shape, its per-dispatch source would make every such dispatch miss its slot and start cold. A
// place named in [compute.WarmOptions.ClaimFiles] is bound instead, read-only as the cold bind is, to
// an empty file of the slot's own (in its directory, root's); the claim writes the dispatch's
// file into it in place (the sandbox has that inode bound) before the sandbox is released.
// Nothing in the slot can write it before: its bind is read-only from bwrap's start.

// maxClaimFile caps a claim file's size (a trust store is well below it).
const maxClaimFile = 16 << 20

// claimFileBind makes the slot's empty file for the template's bind b and returns the bind
// of it at b's place.
func (s *Slot) claimFileBind(b compute.Bind) (compute.Bind, error) {
	if _, ok := s.files[b.Dst]; ok {
		return compute.Bind{}, fmt.Errorf("claim file %s: bound twice", b.Dst)
	}
	host := filepath.Join(s.dir, "file-"+strconv.Itoa(len(s.files)))
	f, err := os.OpenFile(host, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return compute.Bind{}, fmt.Errorf("claim file %s: %w", b.Dst, err)
	}
	f.Close()
	if s.files == nil {
		s.files = map[string]string{}
	}
	s.files[b.Dst] = host
	return compute.Bind{Src: host, Dst: b.Dst}, nil
}

// fillClaimFiles writes each claim file of spec (its shape is the slot's: it has exactly the
// slot's claim files) into the slot's file bound at its place, with the source's mode.
func (s *Slot) fillClaimFiles(spec compute.Spec) error {
	for _, b := range spec.Binds {
		if !s.opts.IsClaimFile(b) {
			continue
		}
		host, ok := s.files[b.Dst]
		if !ok {
			return fmt.Errorf("claim file %s: the slot has none: %w", b.Dst, ErrSlotShape)
		}
		if err := copyClaimFile(b.Src, host); err != nil {
			return fmt.Errorf("claim file %s: %w", b.Dst, err)
		}
	}
	return nil
}

// copyClaimFile copies src, a regular file reached without a symlink, over dst in place.
// src is opened non-blocking: a FIFO there (no writer) would hold the claim, and the dispatch,
// in its open forever, with no context to end it; it is refused by its kind.
func copyClaimFile(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxClaimFile {
		return fmt.Errorf("%s is not a regular file of at most %d bytes", src, maxClaimFile)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, maxClaimFile+1))
	if err == nil && n > maxClaimFile {
		err = errors.New("it grew over the cap while copied")
	}
	if err == nil {
		err = out.Chmod(fi.Mode().Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
