// Package anchor holds the implementations of the audit log's anchor seam (audit.Anchor):
// [File] appends each checkpoint to a file on other storage and detects rollback and
// truncation, [RFC3161] gets a timestamp token over it from a time-stamping authority, and
// [Command] pipes it to an operator's program (an upload to object-lock storage, say), and
// [S3] writes it as an Object Lock object to an S3 bucket.
//
// anchor runs on the host side. It reaches the network only through package egress (no proxy
// variables, no private addresses unless the policy allows them) and never puts URL userinfo
// or query strings in names or errors. It handles only signed checkpoints, which are public.
package anchor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// maxFileTail is how much of an anchor file's end is read to find its last record; a record
// is a few hundred bytes.
const maxFileTail = 16 << 10

// File appends each checkpoint, as one JSON line {"checkpoint": "<base64>"}, to a file that
// SHOULD live on other storage than the database (another disk, an NFS export, a mount with
// append-only attributes). Before appending it hands the file's last checkpoint to the
// checkpointer, which refuses when the file is ahead of the log (the database was rolled
// back or truncated), not a prefix of it (rewritten), or behind what the log once anchored
// there (the file was truncated). Writers are ordered by an exclusive flock on the file.
type File struct {
	path string
	now  func() time.Time
}

// NewFile returns a file anchor appending to path, which SHOULD be absolute.
func NewFile(path string, now func() time.Time) *File {
	if now == nil {
		now = time.Now
	}
	return &File{path: path, now: now}
}

// Name is "file:" and the path.
func (f *File) Name() string { return "file:" + f.path }

type fileRecord struct {
	Checkpoint []byte `json:"checkpoint"`
}

// Anchor appends checkpoint to the file after checkPrevious accepts the file's last record.
func (f *File) Anchor(ctx context.Context, checkpoint []byte, checkPrevious func(context.Context, []byte) error) (verify.Evidence, error) {
	fd, err := os.OpenFile(f.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return verify.Evidence{}, fmt.Errorf("open anchor file: %w", err)
	}
	defer fd.Close()
	if err := unix.Flock(int(fd.Fd()), unix.LOCK_EX); err != nil {
		return verify.Evidence{}, fmt.Errorf("lock anchor file %s: %w", f.path, err)
	}
	defer unix.Flock(int(fd.Fd()), unix.LOCK_UN)
	last, size, partial, err := lastRecord(fd)
	if err != nil {
		return verify.Evidence{}, fmt.Errorf("read anchor file %s: %w", f.path, err)
	}
	if err := checkPrevious(ctx, last); err != nil {
		return verify.Evidence{}, err
	}
	line, err := json.Marshal(fileRecord{Checkpoint: checkpoint})
	if err != nil {
		return verify.Evidence{}, err
	}
	if partial {
		// A crash left half a record: end it so the new one stands on its own line.
		line = append([]byte("\n"), line...)
		size++
	}
	if _, err := fd.Write(append(line, '\n')); err != nil {
		return verify.Evidence{}, fmt.Errorf("append to anchor file %s: %w", f.path, err)
	}
	if err := fd.Sync(); err != nil {
		return verify.Evidence{}, fmt.Errorf("sync anchor file %s: %w", f.path, err)
	}
	sum := sha256.Sum256(checkpoint)
	return verify.Evidence{
		Type:             verify.AnchorFile,
		Name:             f.Name(),
		At:               f.now().UTC(),
		CheckpointSHA256: sum[:],
		Locator:          fmt.Sprintf("%s at byte %d", f.path, size),
	}, nil
}

// lastRecord returns the checkpoint of the file's last complete line (nil when it has none),
// the file's size, and whether it ends in a partial line.
func lastRecord(fd *os.File) (last []byte, size int64, partial bool, err error) {
	fi, err := fd.Stat()
	if err != nil {
		return nil, 0, false, err
	}
	size = fi.Size()
	start := max(0, size-maxFileTail)
	tail := make([]byte, size-start)
	if _, err := fd.ReadAt(tail, start); err != nil && err != io.EOF {
		return nil, 0, false, err
	}
	partial = len(tail) > 0 && tail[len(tail)-1] != '\n'
	if partial {
		tail = tail[:bytes.LastIndexByte(tail, '\n')+1]
	}
	tail = bytes.TrimSuffix(tail, []byte("\n"))
	if len(tail) == 0 {
		return nil, size, partial, nil
	}
	i := bytes.LastIndexByte(tail, '\n')
	if i < 0 && start > 0 {
		return nil, 0, false, fmt.Errorf("last record is longer than %d bytes", maxFileTail)
	}
	dec := json.NewDecoder(bytes.NewReader(tail[i+1:]))
	dec.DisallowUnknownFields()
	var rec fileRecord
	if err := dec.Decode(&rec); err != nil || len(rec.Checkpoint) == 0 {
		return nil, 0, false, fmt.Errorf("last record is not a checkpoint record")
	}
	return rec.Checkpoint, size, partial, nil
}
