package netgw

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Caps of one upload.
const (
	// MaxUploadBytes caps the bytes of the regular files of one upload (the local disk
	// quota's default).
	MaxUploadBytes = 2 << 30
	// MaxUploadEntries caps the entries (files and directories) of one upload.
	MaxUploadEntries = 4096
	// maxUploadName caps an entry's name.
	maxUploadName = 1024
)

// UploadError is why an upload was refused; the out directory is then unchanged.
type UploadError struct {
	Entry  string // the entry's name as the tar gave it (quoted when shown), empty when none
	Reason string
	Err    error // the file system's error behind Reason, if any
}

func (e *UploadError) Unwrap() error { return e.Err }

func (e *UploadError) Error() string {
	if e.Entry == "" {
		return "upload refused: " + e.Reason
	}
	return fmt.Sprintf("upload refused: entry %q: %s", e.Entry, e.Reason)
}

// upload receives a Result mount's tar, once (uploadmark.go): the first upload the gateway
// stores or refuses for its content is final. One cut off by its connection, or by the
// gateway's own death, is not: the worker retries it. A retry of a stored upload with the
// same bytes is answered 204 again; any other upload after the first is refused.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, rec *record, m *mountRecord) {
	sd, _ := sessionDir(s.Registry.Dir, rec.Dispatch)
	unlock, err := lockUpload(sd, m.Name)
	if errors.Is(err, errUploadBusy) {
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "an upload of the mount is in progress; retry")
		return
	}
	if err != nil {
		s.logger().Error("gateway upload lock", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
		retryLater(w, "claim the upload")
		return
	}
	defer unlock()
	prev, err := readUploadMark(sd, m.Name)
	switch {
	case err == nil && !prev.Placing:
		s.uploadAgain(w, r, rec, m, prev)
		return
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		s.logger().Error("gateway upload mark unreadable", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
		httpError(w, http.StatusInternalServerError, "claim the upload")
		return
	}
	removeStaging(m.Src)
	rc := http.NewResponseController(w)
	caps := uploadCaps{bytes: s.uploadBytes(rec), entries: s.MaxUploadEntries}
	body := newBodyReader(&deadlineReader{r: r.Body, rc: rc})
	var src io.Reader = body
	var kept *keptBody
	if s.Registry.Uploads != nil {
		// The bytes as they came, to keep beyond this disk once they are placed (kept.go).
		if kept, err = newKeptBody(sd, m.Name, keptLimit(caps)); err != nil {
			s.logger().Error("gateway upload", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
			retryLater(w, "claim the upload")
			return
		}
		defer kept.discard()
		src = io.TeeReader(body, kept)
	}
	st, err := stageUpload(src, m.Src, caps)
	if err == nil {
		defer st.discard()
	}
	if err != nil && body.err != nil {
		// The connection failed, not the content: nothing is claimed or placed, and what was
		// staged is gone with its temporary directory.
		s.logger().Warn("gateway upload interrupted", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", body.err)
		httpError(w, http.StatusBadRequest, "upload interrupted; retry")
		return
	}
	if err != nil && hostFailure(err) {
		// The host's storage failed (its disk full: other dispatches' uploads, each within
		// its cap, fill it on a wide run), not the content: nothing is claimed, and the worker
		// sends the same upload again (this was a refusal for good).
		s.logger().Error("gateway upload: the host's storage failed", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
		_, _ = io.CopyN(io.Discard, r.Body, refusedDrain)
		retryLater(w, "the host could not store the upload now")
		return
	}
	mark := body.mark()
	// The body took its time: the session may have ended meanwhile (revoked, or exported
	// again with another token). An upload that outlived its token leaves no trace: no mark
	// in a newer session's directory, nothing in the out directory.
	release, stands := s.holdSession(r.Context(), rec)
	if stands != nil {
		if errors.Is(stands, errFenced) {
			// This replica's fence shut while the body came: nothing is stored here, and
			// the worker's retry reaches the replica that leads now.
			s.logger().Warn("gateway upload refused", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", stands.Error())
			retryLater(w, "store the upload on the leading replica")
			return
		}
		s.logger().Warn("gateway upload refused", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", "the session ended while the upload came")
		httpError(w, http.StatusUnauthorized, "the session ended while the upload came; nothing was stored")
		return
	}
	defer release()
	switch {
	case prev.Placing && (err != nil || !prev.sameBody(mark)):
		// A gateway died placing another upload: only that one may finish.
		s.logger().Warn("gateway upload refused", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", "another upload is being placed")
		_, _ = io.CopyN(io.Discard, r.Body, refusedDrain)
		httpError(w, http.StatusConflict, "the mount was uploaded already")
		return
	case err != nil:
		s.refuseUpload(w, r, rec, m, sd, err)
		return
	}
	mark.Placing = true
	if err := writeUploadMark(sd, m.Name, mark); err != nil {
		s.logger().Error("gateway upload mark", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
		retryLater(w, "record the upload")
		return
	}
	if err := st.place(); err != nil {
		// Placing, not placed: the same bytes again finish it.
		s.logger().Error("gateway upload", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
		retryLater(w, "place the upload")
		return
	}
	mark.Placing = false
	if err := s.fenced(); err != nil {
		// Placed, not stored: the fence shut while it was placed; the same bytes finish it
		// on this replica, and only if it leads again.
		s.logger().Warn("gateway upload refused", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err.Error())
		retryLater(w, "store the upload on the leading replica")
		return
	}
	if kept != nil {
		// Placed, not yet answered: kept beyond this disk first, or the worker, told its
		// upload is stored, exits, and a leader that dies now takes its result along. On
		// failure the mark stays placing: the same bytes again finish it.
		if err := s.keep(r.Context(), rec, m, mark, kept, caps, st.entries); err != nil {
			s.logger().Error("gateway upload: not kept beyond this replica", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
			retryLater(w, "keep the upload beyond this replica")
			return
		}
	}
	if err := writeUploadMark(sd, m.Name, mark); err != nil {
		s.logger().Error("gateway upload mark", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
		retryLater(w, "record the upload")
		return
	}
	s.logger().Info("gateway upload", "dispatch_id", rec.Dispatch, "mount", m.Name, "entries", st.entries)
	w.WriteHeader(http.StatusNoContent)
}

// holdSession takes the dispatch's lock (reglock.go) and returns nil when rec's session still
// stands, with rec's token, and this replica leads (Server.Fence; else an error wrapping
// errFenced); while the returned func is not called, no export, revocation or close of the
// dispatch's session can happen.
func (s *Server) holdSession(ctx context.Context, rec *record) (release func(), stands error) {
	if err := s.fenced(); err != nil {
		return nil, fmt.Errorf("%w: %w", errFenced, err)
	}
	unlock, err := s.Registry.lockDispatch(ctx, rec.Dispatch)
	if err != nil {
		return nil, err
	}
	cur, err := s.Registry.standing(ctx, rec.Dispatch)
	if err == nil && cur.TokenSHA256 != rec.TokenSHA256 {
		err = ErrNoSession
	}
	if err != nil {
		unlock(errors.Is(err, ErrNoSession)) // no session: no lock file to keep
		return nil, err
	}
	return func() { unlock(false) }, nil
}

// errFenced: this replica's leader fence refuses (Server.Fence).
var errFenced = errors.New("this gateway's serve does not lead")

// retryLater answers that the host failed the request, not its sender: 503, which the worker
// retries (its transient statuses), and, were the failure to last, reports as the gateway's.
// A 500 it would have taken for a refusal of its own.
func retryLater(w http.ResponseWriter, what string) {
	w.Header().Set("Retry-After", "1")
	httpError(w, http.StatusServiceUnavailable, what+" failed on the host; retry")
}

// hostFailure reports a failure of the host's own resources (its disk full or failing, out of
// descriptors or memory), which says nothing of what was sent.
func hostFailure(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// refuseUpload makes the mount's refusal final and answers it.
func (s *Server) refuseUpload(w http.ResponseWriter, r *http.Request, rec *record, m *mountRecord, sd string, err error) {
	s.logger().Warn("gateway upload refused", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
	if merr := writeUploadMark(sd, m.Name, uploadMark{Refused: true}); merr != nil {
		s.logger().Error("gateway upload mark", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", merr)
	}
	// Read on a little so the refusal reaches the worker: closing with its bytes unread
	// resets the connection, and the worker would see "connection reset" instead of why.
	// Bounded: a larger rest is cut off, and the dispatch fails either way.
	_, _ = io.CopyN(io.Discard, r.Body, refusedDrain)
	var ue *UploadError
	if errors.As(err, &ue) {
		httpError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	httpError(w, http.StatusBadRequest, "upload failed")
}

// uploadAgain answers an upload of a mount whose upload is final: 204 when it is a retry of
// the stored one (the same bytes: the worker did not hear the first answer), else 409. At
// most the stored upload's length (plus one byte) is read to tell.
func (s *Server) uploadAgain(w http.ResponseWriter, r *http.Request, rec *record, m *mountRecord, mark uploadMark) {
	if !mark.Refused {
		rc := http.NewResponseController(w)
		body := newBodyReader(&deadlineReader{r: r.Body, rc: rc})
		_, _ = io.Copy(io.Discard, io.LimitReader(body, mark.Size+1))
		if body.err == nil && body.mark().sameBody(mark) {
			s.logger().Info("gateway upload repeated", "dispatch_id", rec.Dispatch, "mount", m.Name)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	s.logger().Warn("gateway upload refused", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", "uploaded already")
	_, _ = io.CopyN(io.Discard, r.Body, refusedDrain) // as for a refusal: let the answer arrive
	httpError(w, http.StatusConflict, "the mount was uploaded already")
}

// uploadBytes is the byte cap of an upload of rec: the session's (the target's disk), within
// the server's.
func (s *Server) uploadBytes(rec *record) int64 {
	server := s.MaxUploadBytes
	if server <= 0 {
		server = MaxUploadBytes
	}
	if rec.MaxUploadBytes > 0 {
		return min(rec.MaxUploadBytes, server)
	}
	return server
}

type uploadCaps struct {
	bytes   int64
	entries int
}

// extractUpload extracts the tar in r into dst, all or nothing (stageUpload, then place). It
// returns the number of entries.
func extractUpload(r io.Reader, dst string, caps uploadCaps) (int, error) {
	st, err := stageUpload(r, dst, caps)
	if err != nil {
		return 0, err
	}
	defer st.discard()
	return st.entries, st.place()
}

// staged is an upload extracted whole beside its out directory, not yet in it.
type staged struct {
	tmp, dst string
	entries  int
}

// stageUpload extracts the tar in r into a fresh directory beside dst (same file system) and
// reads r to its end (a writer's padding after the tar's end marker, at most maxTrailer
// bytes): the whole body is read before anything reaches dst. Regular files and directories
// only, beneath the directory (os.Root), each name clean, local and new; modes 0600 and 0700;
// bytes and entries capped.
func stageUpload(r io.Reader, dst string, caps uploadCaps) (*staged, error) {
	if caps.bytes <= 0 {
		caps.bytes = MaxUploadBytes
	}
	if caps.entries <= 0 {
		caps.entries = MaxUploadEntries
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	st := &staged{tmp: filepath.Join(filepath.Dir(dst), stagingPrefix(dst)+hex.EncodeToString(rnd[:])), dst: dst}
	if err := os.Mkdir(st.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("stage upload: %w", err)
	}
	root, err := os.OpenRoot(st.tmp)
	if err != nil {
		st.discard()
		return nil, fmt.Errorf("stage upload: %w", err)
	}
	st.entries, err = extractInto(root, r, caps)
	root.Close()
	if err == nil {
		var k int64
		switch k, err = io.CopyN(io.Discard, r, maxTrailer+1); {
		case k > maxTrailer:
			err = &UploadError{Reason: fmt.Sprintf("more than %d bytes after the tar's end", maxTrailer)}
		case err == io.EOF:
			err = nil // the body's end: all of it was read
		case err != nil:
			err = fmt.Errorf("read the upload's end: %w", err)
		}
	}
	if err != nil {
		st.discard()
		return nil, err
	}
	return st, nil
}

// place moves the staged entries into the out directory, replacing what it has of their names.
func (st *staged) place() error { return replaceEntries(st.tmp, st.dst) }

// discard removes what is left of the staging directory.
func (st *staged) discard() { os.RemoveAll(st.tmp) }

func extractInto(root *os.Root, r io.Reader, caps uploadCaps) (int, error) {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, &UploadError{Reason: "not a valid tar stream"}
		}
		if n >= caps.entries {
			return 0, &UploadError{Reason: fmt.Sprintf("more than %d entries", caps.entries)}
		}
		name, err := entryName(hdr)
		if err != nil {
			return 0, err
		}
		if seen[name] {
			return 0, &UploadError{Entry: hdr.Name, Reason: "a duplicate entry"}
		}
		seen[name] = true
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return 0, &UploadError{Entry: hdr.Name, Reason: "cannot make the directory: " + errReason(err), Err: err}
			}
		case tar.TypeReg:
			// hdr.Size is a file's logical size, a sparse file's (PAX sparse) included:
			// extractFile writes every byte of it, holes as zeros, so it is what the upload
			// costs the host's disk.
			if hdr.Size < 0 || hdr.Size > caps.bytes-total {
				return 0, &UploadError{Entry: hdr.Name, Reason: fmt.Sprintf("the upload is over the %d byte limit", caps.bytes)}
			}
			total += hdr.Size
			if err := extractFile(root, name, tr, hdr.Size); err != nil {
				return 0, &UploadError{Entry: hdr.Name, Reason: errReason(err), Err: err}
			}
		default:
			return 0, &UploadError{Entry: hdr.Name, Reason: fmt.Sprintf("type %q: only regular files and directories are accepted", typeName(hdr.Typeflag))}
		}
	}
}

// entryName checks a tar name: local, clean, no backslash or NUL, not too long. A
// directory's trailing slash is dropped.
func entryName(hdr *tar.Header) (string, error) {
	name := hdr.Name
	if hdr.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	switch {
	case len(name) > maxUploadName:
		return "", &UploadError{Entry: hdr.Name[:64] + "...", Reason: fmt.Sprintf("a name over %d bytes", maxUploadName)}
	case name == "" || strings.HasPrefix(name, "/") || !fs.ValidPath(name) || path.Clean(name) != name:
		return "", &UploadError{Entry: hdr.Name, Reason: "an absolute, empty or unclean name (.., ., //)"}
	case strings.ContainsAny(name, "\\\x00"):
		return "", &UploadError{Entry: hdr.Name, Reason: "a backslash or NUL in the name"}
	}
	return name, nil
}

// extractFile writes exactly size bytes of r to a new file name beneath root, mode 0600. Its
// parents are made as directories (0700); os.Root refuses a path that leaves the root.
func extractFile(root *os.Root, name string, r io.Reader, size int64) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = errors.New("the tar ended inside the file")
	}
	return err
}

// replaceEntries moves every entry of tmp into dst, replacing what dst has of that name.
func replaceEntries(tmp, dst string) error {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("place upload: %w", err)
	}
	for _, e := range ents {
		to := filepath.Join(dst, e.Name())
		if err := os.RemoveAll(to); err != nil {
			return fmt.Errorf("place upload: %w", err)
		}
		if err := os.Rename(filepath.Join(tmp, e.Name()), to); err != nil {
			return fmt.Errorf("place upload: %w", err)
		}
	}
	return nil
}

// errReason states an extraction error without the staging directory's path.
func errReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hardlink"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "fifo"
	case tar.TypeGNUSparse:
		return "GNU sparse file"
	}
	return string(rune(t))
}

// refusedDrain bounds what a refused upload's rest is read for its answer to arrive.
const refusedDrain = 4 << 20

// maxTrailer bounds the bytes an upload may carry after its tar's end marker (archive/tar's
// writer adds none past the two zero blocks; other writers pad to a record).
const maxTrailer = 64 << 10
