package netgw

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Session files, in the session directory Registry.Dir/<dispatch id>/.
const (
	sessionFile  = "session.json"
	stdoutSocket = "o"    // the supervisor's end of streams/stdout
	stderrSocket = "e"    // the supervisor's end of streams/stderr
	filePrefix   = "f"    // f<I>: the supervisor's end of files/I, served once
	putPrefix    = "put-" // put-<mount>: a Result mount was uploaded (made with O_EXCL)
)

// TokenPrefix starts every gateway token, so redaction and scanners can tell one.
const TokenPrefix = "agw_"

// maxSessionFile caps session.json when it is read back.
const maxSessionFile = 1 << 20

// ErrNoSession: no session is registered for the dispatch, or it was revoked.
var ErrNoSession = errors.New("no gateway session for the dispatch")

// record is session.json: what the server needs to answer a dispatch's routes. It holds the
// token's SHA-256, never the token.
type record struct {
	Version     int           `json:"version"`
	Dispatch    string        `json:"dispatch"`
	TokenSHA256 string        `json:"token_sha256"`
	Mounts      []mountRecord `json:"mounts"`
	Files       int           `json:"files"`
	// MaxUploadBytes caps the bytes of one upload of this session (the target's disk,
	// compute.Limits.Disk); 0 leaves the server's cap.
	MaxUploadBytes int64 `json:"max_upload_bytes,omitempty"`
	// Stored: the session was also recorded in the registry's [SessionStore], which decides
	// whether it stands (stored.go); a local file without the store's row is then revoked.
	Stored bool `json:"stored,omitempty"`
	// Restored: this host took the session back from the store after another replica
	// exported it (a takeover): what its mounts held to fetch, and its files, were on that
	// replica's disk and are not served here.
	Restored bool `json:"restored,omitempty"`
	// Epoch counts the takeovers of the session: each take-back (restore) raises it in the
	// stored row first. A local session.json of an older epoch (a replica leading again on
	// the volume it led from before) is not the session as it stands: 503 until this host
	// takes it back again (stored.go).
	Epoch int `json:"epoch,omitempty"`
}

// mountRecord is a mount and the host path it comes from (the bind's Src).
type mountRecord struct {
	remote.Mount
	Src string `json:"src"`
}

// newToken returns a fresh bearer token and its SHA-256 in hex.
func newToken() (token, sum string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("make a gateway token: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, hashToken(token), nil
}

func hashToken(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// checkToken reports whether token is the session's, in constant time.
func (r *record) checkToken(token string) bool { return tokenMatches(r.TokenSHA256, token) }

// tokenMatches reports whether token's SHA-256 is sum (hex), in constant time.
func tokenMatches(sum, token string) bool {
	want, err := hex.DecodeString(sum)
	if err != nil || len(want) != sha256.Size {
		return false
	}
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], want) == 1
}

// mount returns the session's mount called name.
func (r *record) mount(name string) (*mountRecord, bool) {
	for i := range r.Mounts {
		if r.Mounts[i].Name == name {
			return &r.Mounts[i], true
		}
	}
	return nil, false
}

// socketPath returns the host path of socket sock in mount name, when the session lists it.
func (r *record) socketPath(name, sock string) (string, bool) {
	m, ok := r.mount(name)
	if !ok || !slices.Contains(m.Sockets, sock) {
		return "", false
	}
	return filepath.Join(m.Src, sock), true
}

// sessionDir returns the directory of dispatch id's session. The id is checked first: it
// names a directory, so it never reaches a path unchecked.
func sessionDir(dir, id string) (string, error) {
	if !wire.ValidDispatchID(id) {
		return "", fmt.Errorf("dispatch id %q is not valid", id)
	}
	return filepath.Join(dir, id), nil
}

// loadRecord reads the session of dispatch id; [ErrNoSession] when there is none.
func loadRecord(dir, id string) (*record, error) {
	sd, err := sessionDir(dir, id)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(sd, sessionFile), os.O_RDONLY|noFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("read gateway session %q: %w", id, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSessionFile+1))
	if err != nil {
		return nil, fmt.Errorf("read gateway session %q: %w", id, err)
	}
	if len(b) > maxSessionFile {
		return nil, fmt.Errorf("read gateway session %q: over %d bytes", id, maxSessionFile)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read gateway session %q: %w", id, err)
	}
	if r.Dispatch != id {
		return nil, fmt.Errorf("read gateway session %q: it names dispatch %q", id, r.Dispatch)
	}
	return &r, nil
}

// saveRecord writes session.json into sd atomically, 0600.
func saveRecord(sd string, r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(sd, sessionFile), b, 0o600); err != nil {
		return fmt.Errorf("write gateway session: %w", err)
	}
	return nil
}

// mountName makes a mount name from a bind's destination: [a-z0-9-], at most 40 bytes,
// starting and ending with a letter or digit, unique among taken.
func mountName(dst string, taken map[string]bool) string {
	dst = strings.TrimPrefix(dst, wire.DefaultRoot+"/")
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(dst) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b.WriteRune(c)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	base := cmp.Or(strings.TrimRight(b.String(), "-"), "m")
	name := trimName(base, 40)
	for i := 2; taken[name]; i++ {
		suffix := fmt.Sprintf("-%d", i)
		name = trimName(base, 40-len(suffix)) + suffix
	}
	taken[name] = true
	return name
}

func trimName(s string, n int) string {
	if len(s) > n {
		s = strings.TrimRight(s[:n], "-")
	}
	return s
}
