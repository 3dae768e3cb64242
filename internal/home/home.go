// Package home owns the layout of AGORA_HOME: it creates it (mode 0700) with its database, the
// secret sealing key and the audit signing key pair, and opens them for the commands.
//
// home runs on the host side. Keys never leave their files except to the code that uses them.
package home

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/secret"
	"github.com/agora-dev/agora/internal/store"
)

// Paths inside AGORA_HOME.
const (
	DBFile        = "agora.db"
	BlobDir       = "blobs"
	KeyDir        = "keys"
	SecretKeyFile = "keys/secret.key"
	AuditKeyFile  = "keys/audit.key"
	AuditPubFile  = "keys/audit.pub"
	CallbackKey   = "keys/callback.key"
	DispatchDir   = "dispatches"
)

// Where `agora orch serve` keeps its state, under AGORA_HOME: OrchDir holds orch.db, its
// socket and the resident dispatcher's.
const (
	OrchDir    = "orch"
	OrchDB     = "orch.db"
	OrchSocket = "orch.sock"
)

// ReplicaDBs are the databases a home replicates (replicate.s3), by their names in the bucket:
// agora.db and OrchDir's orch.db.
var ReplicaDBs = [...]string{"agora", "orch"}

// Home is an open AGORA_HOME.
type Home struct {
	Dir    string
	Config *config.Config
	DB     *store.DB
	Blobs  *blob.Store
}

// Init creates AGORA_HOME at dir if needed, with every file it must hold, and reports what it
// created. Running it again creates nothing and changes nothing. schema is agora.db's
// migrations ([github.com/agora-dev/agora/internal/agoradb.Migrations]), passed in so that
// home imports none of the packages that own its tables.
func Init(ctx context.Context, dir string, schema []store.Migration) (created []string, err error) {
	created, db, _, err := initHome(ctx, dir, schema)
	if err != nil {
		return nil, err
	}
	db.Close()
	return created, nil
}

// initHome is Init, returning the database and blob store it opened: [Open] keeps them
// rather than open agora.db a second time in the same process.
func initHome(ctx context.Context, dir string, schema []store.Migration) (created []string, db *store.DB, blobs *blob.Store, err error) {
	if err := ensureDir(dir, &created); err != nil {
		return nil, nil, nil, err
	}
	if err := ensureDir(filepath.Join(dir, KeyDir), &created); err != nil {
		return nil, nil, nil, err
	}
	secretKey := filepath.Join(dir, SecretKeyFile)
	if _, err := os.Stat(secretKey); errors.Is(err, fs.ErrNotExist) {
		created = append(created, secretKey)
	}
	if _, err := secret.LoadOrCreateKey(secretKey); err != nil {
		return nil, nil, nil, err
	}
	if err := ensureAuditKey(dir, &created); err != nil {
		return nil, nil, nil, err
	}
	if err := ensureRandomKey(filepath.Join(dir, CallbackKey), &created); err != nil {
		return nil, nil, nil, err
	}
	dbPath := filepath.Join(dir, DBFile)
	if _, err := os.Stat(dbPath); errors.Is(err, fs.ErrNotExist) {
		created = append(created, dbPath)
	}
	db, err = store.Open(ctx, dbPath, schema)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := os.Chmod(dbPath, 0o600); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	if blobs, err = blob.Open(filepath.Join(dir, BlobDir)); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return created, db, blobs, nil
}

func ensureDir(dir string, created *[]string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		*created = append(*created, dir)
		return os.Chmod(dir, 0o700) // MkdirAll obeys the umask
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o: other users could read agora's keys and database; run chmod 700 %s",
			dir, fi.Mode().Perm(), dir)
	}
	return nil
}

func ensureAuditKey(dir string, created *[]string) error {
	priv := filepath.Join(dir, AuditKeyFile)
	if _, err := os.Stat(priv); err == nil {
		_, err := loadSigner(priv)
		return err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, "agora/"+hex.EncodeToString(id[:]))
	if err != nil {
		return fmt.Errorf("generate audit key: %w", err)
	}
	if err := writeFileAtomic(priv, []byte(skey+"\n"), 0o600); err != nil {
		return err
	}
	// Public, yet 0600 like every file agora makes: it is handed to verifiers by copying it
	// out, and a home with no exceptions is one a test can hold to the rule.
	if err := writeFileAtomic(filepath.Join(dir, AuditPubFile), []byte(vkey+"\n"), 0o600); err != nil {
		return err
	}
	*created = append(*created, priv, filepath.Join(dir, AuditPubFile))
	return nil
}

// ensureRandomKey creates a 32-byte random key file (0600) if it is missing.
func ensureRandomKey(path string, created *[]string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		return err
	}
	if err := writeFileAtomic(path, k[:], 0o600); err != nil {
		return err
	}
	*created = append(*created, path)
	return nil
}

// CallbackKey reads the key that signs callback deliveries.
func (h *Home) CallbackKey() ([]byte, error) {
	p := filepath.Join(h.Dir, CallbackKey)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("read callback key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("callback key %s has mode %04o; run chmod 600 %s", p, fi.Mode().Perm(), p)
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("callback key %s is not a 32-byte key", p)
	}
	return b, nil
}

func loadSigner(path string) (note.Signer, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read audit key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("audit key %s has mode %04o; run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read audit key: %w", err)
	}
	s, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("audit key %s is not a valid signing key", path)
	}
	return s, nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// MissingError reports an AGORA_HOME that was never initialised: [OpenExisting] refuses to
// create one. Dir is the home; Missing is the first thing not found in it (the home itself,
// agora.db or the sealing key).
type MissingError struct {
	Dir     string
	Missing string
	// NotDir is set when Dir exists but is not a directory (AGORA_HOME set to a file).
	NotDir bool
}

func (e *MissingError) Error() string {
	if e.NotDir {
		return fmt.Sprintf("AGORA_HOME %s is not a directory", e.Dir)
	}
	if e.Missing == e.Dir {
		return fmt.Sprintf("AGORA_HOME %s does not exist", e.Dir)
	}
	return fmt.Sprintf("AGORA_HOME %s is not initialised: %s is missing", e.Dir, e.Missing)
}

// Hint says how to create the home, or how to point at the one that exists.
func (e *MissingError) Hint() string {
	if e.NotDir {
		return "set AGORA_HOME to the home directory you provisioned, or to a new path and run 'agora init' there"
	}
	return fmt.Sprintf("create it with 'AGORA_HOME=%s agora init', or set AGORA_HOME to the home you provisioned", e.Dir)
}

// OpenExisting opens dir like [Open] but only when it was initialised already: the home, its
// database and its sealing key must exist. A long-running server a client starts (agora mcp)
// uses it, so a mistyped or missing AGORA_HOME is an error naming the path instead of a new,
// empty home that silently serves nothing.
func OpenExisting(ctx context.Context, dir string, schema []store.Migration) (*Home, error) {
	if err := CheckInitialised(dir); err != nil {
		return nil, err
	}
	return Open(ctx, dir, schema)
}

// CheckInitialised returns a [*MissingError] unless dir is an initialised home (the home, its
// database and its sealing key exist). It opens and creates nothing.
func CheckInitialised(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return &MissingError{Dir: dir, Missing: dir, NotDir: true}
	}
	for _, p := range []string{dir, filepath.Join(dir, DBFile), filepath.Join(dir, SecretKeyFile)} {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return &MissingError{Dir: dir, Missing: p}
		} else if err != nil {
			return fmt.Errorf("AGORA_HOME %s: %w", dir, err)
		}
	}
	return nil
}

// Open initialises dir on first use and opens it, migrating agora.db to schema (see [Init]).
func Open(ctx context.Context, dir string, schema []store.Migration) (*Home, error) {
	_, db, blobs, err := initHome(ctx, dir, schema)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(dir)
	if err != nil {
		db.Close()
		return nil, err
	}
	// blobs.s3 moves the blob store to a bucket; the local directory stays created.
	if remote, err := remoteBlobs(cfg); err != nil {
		db.Close()
		return nil, err
	} else if remote != nil {
		blobs = remote
	}
	return &Home{Dir: dir, Config: cfg, DB: db, Blobs: blobs}, nil
}

// Sealer loads the secret sealing key.
func (h *Home) Sealer() (*secret.Sealer, error) {
	return secret.LoadOrCreateKey(filepath.Join(h.Dir, SecretKeyFile))
}

// AuditSigner loads the checkpoint signing key.
func (h *Home) AuditSigner() (note.Signer, error) {
	return loadSigner(filepath.Join(h.Dir, AuditKeyFile))
}

// Close closes the database.
func (h *Home) Close() error { return h.DB.Close() }
