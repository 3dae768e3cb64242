package replicate

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/s3"
)

// RestoreOptions say what to restore and where.
type RestoreOptions struct {
	Client *s3.Client
	// DB is the database's name in the bucket ("agora", "orch").
	DB string
	// Identity is the home's audit key name: a replica naming another home is refused.
	Identity string
	// Key is the home's segment key ([SegmentKey]): a segment it does not authenticate is refused.
	Key []byte
	// Path is where the database is written; it must not exist.
	Path string
	// At, when set, restores the state as of that time (the last whole sync read before it);
	// zero restores the newest.
	At time.Time
}

// Restored says what a restore brought back.
type Restored struct {
	DB         string    `json:"db"`
	Generation string    `json:"generation"`
	Seq        uint64    `json:"seq"`      // the last segment applied
	Time       time.Time `json:"time"`     // its read snapshot: every commit before it is back
	Pages      uint32    `json:"pages"`    // the database's size in pages
	Segments   int       `json:"segments"` // segments read
	// Skipped names the newer generations passed over, each with why: one whose first sync
	// never finished uploading (a serve killed as it began it) restores nothing.
	Skipped []string `json:"skipped,omitempty"`
}

// ErrNoReplica means the bucket holds no replica of the database (at the time asked for).
var ErrNoReplica = errors.New("no replica")

// errNoWholeSync: a generation's segments all check, but none ends a sync (before o.At). It is
// not [ErrNoReplica]: a replica that exists but restores nothing fails the restore, never
// reads as a database that was never replicated.
var errNoWholeSync = errors.New("holds no whole sync")

// Restore writes the database o.DB as replicated to o.Client into o.Path: the newest
// generation that began before o.At, its segments in order, up to the last whole sync. Every
// segment must decode, name o.Identity and o.DB, follow its predecessor's hash and carry the
// next number: a corrupt, truncated or missing object, or another home's, is an error and
// o.Path is not created. The result passes SQLite's integrity check before it is renamed in.
func Restore(ctx context.Context, o RestoreOptions) (Restored, error) {
	if err := checkDBName(o.DB); err != nil {
		return Restored{}, err
	}
	if len(o.Key) < 16 {
		return Restored{}, errors.New("restore: the home's segment key is required")
	}
	if _, err := os.Lstat(o.Path); !errors.Is(err, fs.ErrNotExist) {
		return Restored{}, fmt.Errorf("restore %s: %s exists; restore into a new directory", o.DB, o.Path)
	}
	gens, err := generations(ctx, o.Client, o.DB)
	if err != nil {
		return Restored{}, err
	}
	var skipped []string
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		if !o.At.IsZero() && g.created.After(o.At) {
			continue
		}
		res, err := restoreGeneration(ctx, o, g)
		if errors.Is(err, errNoWholeSync) && i > 0 {
			// A generation begins with a whole copy of the database; a serve killed while
			// uploading it (or an --at before its end) leaves segments that restore nothing.
			// The generation before it is then the newest whole state. Falling back weakens
			// nothing: deleting the newest generation outright does the same, and the anchor
			// check after a restore catches a home rolled back past an anchored checkpoint.
			skipped = append(skipped, fmt.Sprintf("%s: %v", g.name, err))
			continue
		}
		res.Skipped = skipped
		return res, err
	}
	if len(skipped) > 0 { // the older ones all begin after o.At
		return Restored{}, fmt.Errorf("restore %s: no generation begun before %s holds a whole sync (%s)", o.DB,
			o.At.UTC().Format(time.RFC3339Nano), strings.Join(skipped, "; "))
	}
	if len(gens) == 0 {
		return Restored{}, fmt.Errorf("restore %s: %w under %s", o.DB, ErrNoReplica, o.Client.ObjectURL("replica/"+o.DB+"/"))
	}
	return Restored{}, fmt.Errorf("restore %s: %w begun before %s (the oldest generation began %s)", o.DB, ErrNoReplica,
		o.At.UTC().Format(time.RFC3339Nano), gens[0].created.UTC().Format(time.RFC3339Nano))
}

type generation struct {
	name    string
	created time.Time
	seqs    []uint64
}

// generations lists the database's generations, oldest first, with their segment numbers.
func generations(ctx context.Context, c *s3.Client, db string) ([]generation, error) {
	dir := "replica/" + db + "/"
	names, err := c.List(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", db, err)
	}
	byName := map[string]*generation{}
	for _, n := range names {
		rest := strings.TrimPrefix(n, dir)
		gname, seqHex, ok := strings.Cut(rest, "/")
		graw, gerr := hex.DecodeString(gname)
		seq, serr := strconv.ParseUint(seqHex, 16, 64)
		// Lower-case hex only, as objectName writes them: an upper-case spelling decodes to
		// the same generation and segment, and would read as another generation whose
		// segments are this one's (a prune would delete them).
		if !ok || gerr != nil || len(graw) != 16 || serr != nil || len(seqHex) != 16 ||
			hex.EncodeToString(graw) != gname || fmt.Sprintf("%016x", seq) != seqHex {
			return nil, fmt.Errorf("restore %s: %s: not a replica segment name", db, c.ObjectURL(n))
		}
		g := byName[gname]
		if g == nil {
			g = &generation{name: gname, created: time.Unix(0, int64(beUint64(graw[:8])))}
			byName[gname] = g
		}
		g.seqs = append(g.seqs, seq)
	}
	gens := make([]generation, 0, len(byName))
	for _, g := range byName {
		sort.Slice(g.seqs, func(i, j int) bool { return g.seqs[i] < g.seqs[j] })
		gens = append(gens, *g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i].name < gens[j].name })
	return gens, nil
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// restoreGeneration downloads and checks the generation's segments into a staging directory
// beside o.Path, then applies them up to the last whole sync (not after o.At).
func restoreGeneration(ctx context.Context, o RestoreOptions, g generation) (Restored, error) {
	res := Restored{DB: o.DB, Generation: g.name}
	stage, err := os.MkdirTemp(filepath.Dir(o.Path), ".restore-"+o.DB+"-")
	if err != nil {
		return res, fmt.Errorf("restore %s: %w", o.DB, err)
	}
	defer os.RemoveAll(stage)
	var prev [32]byte
	var staged []string
	var last *segment // the header of the last segment to apply
	lastCommit := -1
	firstPages := 0
	for i, seq := range g.seqs {
		name := objectName(o.DB, mustGen(g.name), seq)
		if seq != uint64(i) {
			return res, fmt.Errorf("restore %s: generation %s has no segment %d (next is %d): the replica is incomplete", o.DB, g.name, i, seq)
		}
		b, _, err := o.Client.Get(ctx, name, "", maxSegmentBytes+1)
		if err != nil {
			return res, fmt.Errorf("restore %s: %w", o.DB, err)
		}
		s, err := decodeSegment(b, o.Key)
		if id, ok := peekIdentity(b); err != nil && ok && id != o.Identity {
			return res, fmt.Errorf("restore %s: %s says it belongs to home %q, not %q: the bucket holds another home's replica under this prefix; restore --at a time before %s (when that generation began) to pass over it (%w)",
				o.DB, o.Client.ObjectURL(name), truncate(id, 80), o.Identity, g.created.UTC().Format(time.RFC3339Nano), err)
		}
		if err != nil {
			return res, fmt.Errorf("restore %s: %s: %w", o.DB, o.Client.ObjectURL(name), err)
		}
		switch {
		case s.Identity != o.Identity:
			return res, fmt.Errorf("restore %s: %s belongs to home %q, not %q: the bucket holds another home's replica under this prefix",
				o.DB, o.Client.ObjectURL(name), truncate(s.Identity, 80), o.Identity)
		case s.DB != o.DB || hex.EncodeToString(s.Generation[:]) != g.name || s.Seq != seq:
			return res, fmt.Errorf("restore %s: %s: %w: it says it is %s/%x/%d", o.DB, o.Client.ObjectURL(name), ErrCorrupt, truncate(s.DB, 64), s.Generation, s.Seq)
		case s.Prev != prev:
			return res, fmt.Errorf("restore %s: %s: %w: it does not follow segment %d (a segment was replaced)", o.DB, o.Client.ObjectURL(name), ErrCorrupt, seq-1)
		}
		if lastCommit < 0 {
			firstPages += len(s.Pages)
			if s.Commit && firstPages != int(s.PageCount) {
				return res, fmt.Errorf("restore %s: %s: %w: the generation's first sync holds %d of %d pages", o.DB, o.Client.ObjectURL(name), ErrCorrupt, firstPages, s.PageCount)
			}
		}
		if !o.At.IsZero() && time.Unix(0, s.Time).After(o.At) {
			break
		}
		prev = sha256.Sum256(b)
		p := filepath.Join(stage, fmt.Sprintf("%016x", seq))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return res, fmt.Errorf("restore %s: %w", o.DB, err)
		}
		staged = append(staged, p)
		res.Segments++
		if s.Commit {
			lastCommit = i
			s.Pages = nil
			last = s
		}
	}
	if lastCommit < 0 {
		return res, fmt.Errorf("restore %s: generation %s %w", o.DB, g.name, errNoWholeSync)
	}
	tmp := filepath.Join(stage, "db")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return res, fmt.Errorf("restore %s: %w", o.DB, err)
	}
	defer f.Close()
	for _, p := range staged[:lastCommit+1] {
		b, err := os.ReadFile(p)
		if err != nil {
			return res, fmt.Errorf("restore %s: %w", o.DB, err)
		}
		s, err := decodeSegment(b, o.Key)
		if err != nil {
			return res, fmt.Errorf("restore %s: staged %s: %w", o.DB, p, err)
		}
		for _, pg := range s.Pages {
			if _, err := f.WriteAt(pg.Data, int64(pg.No-1)*int64(s.PageSize)); err != nil {
				return res, fmt.Errorf("restore %s: %w", o.DB, err)
			}
		}
	}
	if err := f.Truncate(int64(last.PageCount) * int64(last.PageSize)); err != nil {
		return res, fmt.Errorf("restore %s: %w", o.DB, err)
	}
	if err := f.Sync(); err != nil {
		return res, fmt.Errorf("restore %s: %w", o.DB, err)
	}
	f.Close()
	if err := integrityCheck(ctx, tmp); err != nil {
		return res, fmt.Errorf("restore %s: the restored database fails SQLite's integrity check: %w", o.DB, err)
	}
	if err := os.Rename(tmp, o.Path); err != nil {
		return res, fmt.Errorf("restore %s: %w", o.DB, err)
	}
	res.Seq, res.Time, res.Pages = last.Seq, time.Unix(0, last.Time).UTC(), last.PageCount
	return res, nil
}

func mustGen(name string) [16]byte {
	var g [16]byte
	b, _ := hex.DecodeString(name)
	copy(g[:], b)
	return g
}

// integrityCheck opens the restored file read-only and asks SQLite whether it is whole.
func integrityCheck(ctx context.Context, path string) error {
	q := url.Values{}
	q.Set("mode", "ro")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	var out []string
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(out) != 1 || out[0] != "ok" {
		return fmt.Errorf("%s", truncate(strings.Join(out, "; "), 300))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// peekIdentity reads the identity field of a segment that did not authenticate, only to say
// whose it claims to be.
func peekIdentity(b []byte) (string, bool) {
	if len(b) < len(magic)+2 || string(b[:len(magic)]) != magic {
		return "", false
	}
	n := int(b[len(magic)])<<8 | int(b[len(magic)+1])
	if n == 0 || n > maxIdentity || len(magic)+2+n > len(b) {
		return "", false
	}
	return string(b[len(magic)+2 : len(magic)+2+n]), true
}
