package netgw

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A Result mount takes one upload: the first that the gateway stored, or refused for what it
// held, is the mount's for good. The mark (put-<mount>) records where that stands, always
// replaced whole (rename), under an flock on put-<mount>.lock that the kernel drops with a
// gateway killed mid-upload:
//
//   - no mark: nothing was decided. An upload cut off by its connection, or by the gateway's
//     death, while its body was read leaves none (what it staged is beside the out directory,
//     removed by the next upload), and the worker's retry is served like a first upload.
//   - "placing SHA SIZE": the whole body (its SHA-256 and length) was accepted and its entries
//     were being moved into the out directory when the gateway died. Only the same bytes may
//     finish it: a retry is extracted again and placed, anything else refused.
//   - "stored SHA SIZE": final. A retry with the same bytes (the worker did not hear the
//     answer) gets 204 again, anything else 409.
//   - "refused": final; every later upload gets 409.
//
// Nothing in a mark comes from the worker but the digest the gateway computed itself.

// Upload marks.
const (
	markPlacing = "placing"
	markStored  = "stored"
	markRefused = "refused"
	// maxMark caps a mark read back.
	maxMark = 128
	// lockSuffix names the lock beside a mark.
	lockSuffix = ".lock"
)

// uploadMark is where a Result mount's upload stands: refused, or being placed or stored with
// the SHA-256 and length of the request body that brought it.
type uploadMark struct {
	Refused bool
	Placing bool   // accepted whole, not yet all in the out directory
	SHA256  string // hex, 64 characters; "" when refused
	Size    int64  // body bytes; 0 when refused
}

func (m uploadMark) encode() []byte {
	if m.Refused {
		return []byte(markRefused + "\n")
	}
	word := markStored
	if m.Placing {
		word = markPlacing
	}
	return fmt.Appendf(nil, "%s %s %d\n", word, m.SHA256, m.Size)
}

// sameBody reports whether m and o are marks of the same body.
func (m uploadMark) sameBody(o uploadMark) bool {
	return !m.Refused && !o.Refused && m.SHA256 == o.SHA256 && m.Size == o.Size
}

// parseUploadMark reads a mark exactly as encode writes it.
func parseUploadMark(b []byte) (uploadMark, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || strings.ContainsAny(s, "\n\r\x00") {
		return uploadMark{}, errors.New("upload mark: not one line")
	}
	if s == markRefused {
		return uploadMark{Refused: true}, nil
	}
	f := strings.Split(s, " ")
	if len(f) != 3 || (f[0] != markStored && f[0] != markPlacing) || len(f[1]) != sha256.Size*2 || strings.ToLower(f[1]) != f[1] {
		return uploadMark{}, errors.New("upload mark: malformed")
	}
	if _, err := hex.DecodeString(f[1]); err != nil {
		return uploadMark{}, errors.New("upload mark: malformed digest")
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != f[2] {
		return uploadMark{}, errors.New("upload mark: malformed size")
	}
	return uploadMark{Placing: f[0] == markPlacing, SHA256: f[1], Size: n}, nil
}

// readUploadMark returns the mark of mount in session directory sd; fs.ErrNotExist when the
// mount has none yet.
func readUploadMark(sd, mount string) (uploadMark, error) {
	f, err := os.OpenFile(filepath.Join(sd, putPrefix+mount), os.O_RDONLY|noFollow, 0)
	if err != nil {
		return uploadMark{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMark+1))
	if err != nil {
		return uploadMark{}, err
	}
	if len(b) > maxMark {
		return uploadMark{}, errors.New("upload mark: too long")
	}
	return parseUploadMark(b)
}

// writeUploadMark makes mount's mark final, atomically (a reader sees the whole mark or none).
func writeUploadMark(sd, mount string, m uploadMark) error {
	f, err := os.CreateTemp(sd, ".mark-*")
	if err != nil {
		return err
	}
	_, err = f.Write(m.encode())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(sd, putPrefix+mount))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// errUploadBusy: another request holds the mount's upload lock.
var errUploadBusy = errors.New("an upload of the mount is in progress")

// lockUpload takes the mount's upload lock without waiting; the returned func releases it.
// The lock is an flock, which the kernel drops when its holder dies.
func lockUpload(sd, mount string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(sd, putPrefix+mount+lockSuffix), os.O_RDWR|os.O_CREATE|noFollow|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errUploadBusy
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}

// removeStaging removes what an upload killed half-way left beside dst: its staging
// directories (see extractUpload). The caller holds the mount's upload lock.
func removeStaging(dst string) {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), stagingPrefix(dst)+"*"))
	for _, m := range matches {
		if fi, err := os.Lstat(m); err == nil && fi.IsDir() {
			os.RemoveAll(m)
		}
	}
}

// stagingPrefix is the name prefix of dst's staging directories.
func stagingPrefix(dst string) string { return ".upload-" + filepath.Base(dst) + "-" }

// bodyReader reads a request body, hashing and counting what it reads and keeping the first
// read error that is not the body's end: an upload cut off by its connection is the
// transport's failure, not a refusal of what it held.
type bodyReader struct {
	r   io.Reader
	h   hash.Hash
	n   int64
	err error
}

func newBodyReader(r io.Reader) *bodyReader { return &bodyReader{r: r, h: sha256.New()} }

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	b.n += int64(n)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *bodyReader) mark() uploadMark {
	return uploadMark{SHA256: hex.EncodeToString(b.h.Sum(nil)), Size: b.n}
}
