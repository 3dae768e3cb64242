// Package provision is the deploy-time, privileged side of the catalog: it registers
// capabilities, subagents and env bundles, assigns capabilities and retires names. Each change
// commits in one transaction with its audit entry.
//
// Only the CLI (register, assign, apply) imports provision. The MCP server and workers MUST
// NOT: a test of the import graph enforces it, so an AI can compose the catalog but never
// change it.
package provision

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/secret"
	"github.com/agora-dev/agora/internal/store"
)

// Writer changes the catalog.
type Writer struct {
	db     *store.DB
	blobs  *blob.Store
	reader *view.Catalog
	sealer *secret.Sealer
	log    *audit.Log
	now    func() time.Time
	limits catalog.Limits

	// overlays holds, by digest, the overlay files of each capability PrepareCapability
	// built, so a subagent of the same batch (a manifest) is checked for clashes before its
	// capabilities are stored. Content-addressed, so an entry never goes stale.
	overlaysMu sync.Mutex
	overlays   map[digest.Digest][]string // guarded by overlaysMu
}

// Options configures a [Writer].
type Options struct {
	// CapabilityMaxSize caps a capability's file bytes; 0 means 50 MiB.
	CapabilityMaxSize int64
	// Now stamps registrations; nil means time.Now.
	Now func() time.Time
}

// New returns a writer. The sealer seals env bundle secrets; log receives an audit entry for
// every change.
func New(db *store.DB, blobs *blob.Store, sealer *secret.Sealer, log *audit.Log, opts Options) *Writer {
	if opts.CapabilityMaxSize <= 0 {
		opts.CapabilityMaxSize = 50 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Writer{
		db: db, blobs: blobs, reader: view.New(db, blobs), sealer: sealer, log: log, now: opts.Now,
		limits:   catalog.Limits{MaxTotalSize: opts.CapabilityMaxSize, MaxFiles: catalog.DefaultMaxFiles},
		overlays: map[digest.Digest][]string{},
	}
}

// Reader returns the read side over the same database.
func (w *Writer) Reader() *view.Catalog { return w.reader }

// Pending is content prepared for registration: validated, scanned, encoded and hashed, but not
// yet stored.
type Pending struct {
	Kind    catalog.Kind
	Name    string
	Content []byte
	Digest  digest.Digest
	Meta    catalog.Meta
	secrets []sealedSecret
}

type sealedSecret struct {
	ref    string
	sealed []byte
}

// Change is one step of a plan.
type Change struct {
	Action   string        `json:"action"` // catalog.ActionCreate, ActionUpdate, ActionUnchanged, ActionRetire
	Kind     catalog.Kind  `json:"kind"`
	Name     string        `json:"name"`
	Digest   digest.Digest `json:"digest,omitempty"`
	Previous digest.Digest `json:"previous,omitempty"`
	// Bindings are an env bundle's bound secrets as the change leaves them, and
	// PreviousBindings those of the version it replaces (an update only): a plan shows where a
	// secret may be sent before anyone applies it.
	Bindings         map[string]catalog.Binding `json:"bindings,omitempty"`
	PreviousBindings map[string]catalog.Binding `json:"previous_bindings,omitempty"`
	// ApproveNotes say what a capability's approve rules cannot see ([grant.ApproveNotes]),
	// so the person registering it reads them before anyone relies on the rules.
	ApproveNotes []string `json:"approve_notes,omitempty"`
	pending      *Pending
}

// Plan works out what registering pendings (and, with prune, retiring every active name of a
// kind that pendings do not mention) would change. It writes nothing.
func (w *Writer) Plan(ctx context.Context, pendings []*Pending, prune bool) ([]Change, error) {
	var changes []Change
	declared := map[catalog.Kind]map[string]bool{}
	for _, p := range pendings {
		if declared[p.Kind] == nil {
			declared[p.Kind] = map[string]bool{}
		}
		if declared[p.Kind][p.Name] {
			return nil, fmt.Errorf("%s %q is declared twice", p.Kind, p.Name)
		}
		declared[p.Kind][p.Name] = true
		c, err := w.planOne(ctx, w.db.SQL(), p)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
	}
	if prune {
		for _, kind := range catalog.Kinds {
			names, err := w.reader.Names(ctx, kind)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				if declared[kind][n] {
					continue
				}
				d, _, _, err := w.reader.Head(ctx, kind, n)
				if err != nil {
					return nil, err
				}
				changes = append(changes, Change{Action: catalog.ActionRetire, Kind: kind, Name: n, Previous: d})
			}
		}
		if err := pinsOfRetired(pendings, changes); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(changes, func(a, b Change) int {
		if ka, kb := slices.Index(catalog.Kinds, a.Kind), slices.Index(catalog.Kinds, b.Kind); ka != kb {
			return ka - kb
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return changes, nil
}

// pinsOfRetired refuses a plan that retires a capability a subagent it keeps still pins: the
// subagent's current version would go on granting what people retired, to every dispatch
// and plan that names it. The person declares the capability again or changes the subagent.
func pinsOfRetired(pendings []*Pending, changes []Change) error {
	retired := map[string]bool{}
	for _, c := range changes {
		if c.Action == catalog.ActionRetire && c.Kind == catalog.KindCapability {
			retired[c.Name] = true
		}
	}
	var problems []string
	for _, p := range pendings {
		if p.Kind != catalog.KindSubagent {
			continue
		}
		for _, pin := range p.Meta.Capabilities {
			if retired[pin.Name] {
				problems = append(problems, fmt.Sprintf("subagent %q pins capability %q", p.Name, pin.Name))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("--prune would retire capabilities that subagents it keeps still pin (%s): declare those capabilities in the manifest, or remove them from the subagents",
			strings.Join(problems, "; "))
	}
	return nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (w *Writer) planOne(ctx context.Context, q querier, p *Pending) (Change, error) {
	c := Change{Kind: p.Kind, Name: p.Name, Digest: p.Digest, Bindings: p.Meta.Bindings, pending: p}
	if p.Meta.CapabilityDoc != nil {
		c.ApproveNotes = grant.ApproveNotes(p.Meta.CapabilityDoc.Set)
	}
	var head digest.Digest
	var retired bool
	err := q.QueryRowContext(ctx, `SELECT digest, retired FROM catalog_heads WHERE kind = ? AND name = ?`, p.Kind, p.Name).
		Scan(&head, &retired)
	switch {
	case err == sql.ErrNoRows:
		c.Action = catalog.ActionCreate
	case err != nil:
		return c, fmt.Errorf("look up %s %q: %w", p.Kind, p.Name, err)
	case retired:
		c.Action = catalog.ActionCreate
	case head == p.Digest:
		c.Action = catalog.ActionUnchanged
		c.Previous = head
	default:
		c.Action = catalog.ActionUpdate
		c.Previous = head
		if p.Kind == catalog.KindEnv {
			prev, err := previousMeta(ctx, q, p.Kind, p.Name, head)
			if err != nil {
				return c, err
			}
			c.PreviousBindings = prev.Bindings
		}
	}
	return c, nil
}

// previousMeta reads the metadata of version d of a name through q (the apply's transaction,
// when there is one). A version registered before bindings existed has none, which is right:
// it could not bind anything.
func previousMeta(ctx context.Context, q querier, kind catalog.Kind, name string, d digest.Digest) (catalog.Meta, error) {
	var raw string
	var m catalog.Meta
	err := q.QueryRowContext(ctx, `SELECT meta FROM catalog_versions WHERE kind = ? AND name = ? AND digest = ?`, kind, name, d).Scan(&raw)
	if err != nil {
		return m, fmt.Errorf("look up %s %q@%s: %w", kind, name, d, err)
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return m, fmt.Errorf("%s %q@%s: bad metadata: %w", kind, name, d, err)
	}
	return m, nil
}

// Apply carries out changes in ONE transaction together with their audit entries, plus summary
// when it is non-nil (the apply of a manifest records one). Content is stored in the blob store
// first: a crash before the commit leaves only unreferenced blobs. Each change's action is
// worked out again inside the transaction, so a concurrent registration is never overwritten
// blindly. It returns the changes as committed.
func (w *Writer) Apply(ctx context.Context, actor string, verb string, changes []Change, summary *audit.Entry) ([]Change, error) {
	for _, c := range changes {
		if c.pending != nil && c.Action != catalog.ActionUnchanged {
			if _, err := w.blobs.Put(c.pending.Content); err != nil {
				return nil, err
			}
		}
	}
	var done []Change
	err := w.db.Tx(ctx, func(tx *sql.Tx) error {
		done = done[:0]
		at := w.now().UTC().Format(time.RFC3339Nano)
		for _, c := range changes {
			if c.Action == catalog.ActionRetire {
				ok, err := w.retire(ctx, tx, actor, at, c)
				if err != nil {
					return err
				}
				if ok {
					done = append(done, c)
				}
				continue
			}
			fresh, err := w.planOne(ctx, tx, c.pending)
			if err != nil {
				return err
			}
			if fresh.Action != catalog.ActionUnchanged {
				if err := w.register(ctx, tx, actor, verb, at, fresh); err != nil {
					return err
				}
			}
			done = append(done, fresh)
		}
		if summary != nil {
			if _, err := w.log.Append(ctx, tx, *summary); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

func (w *Writer) register(ctx context.Context, tx *sql.Tx, actor, verb, at string, c Change) error {
	p := c.pending
	meta, err := json.Marshal(p.Meta)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `
INSERT OR IGNORE INTO catalog_versions(kind, name, digest, size, registered_at, registered_by, meta)
VALUES (?, ?, ?, ?, ?, ?, ?)`, p.Kind, p.Name, p.Digest, len(p.Content), at, actor, string(meta)); err != nil {
		return fmt.Errorf("register %s %q: %w", p.Kind, p.Name, err)
	}
	for _, s := range p.secrets {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO sealed_secrets(ref, sealed, created_at) VALUES (?, ?, ?)`,
			s.ref, s.sealed, at); err != nil {
			return fmt.Errorf("register %s %q: store sealed secret: %w", p.Kind, p.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO catalog_history(kind, name, action, digest, at, actor) VALUES (?, ?, ?, ?, ?, ?)`,
		p.Kind, p.Name, c.Action, p.Digest, at, actor); err != nil {
		return fmt.Errorf("register %s %q: %w", p.Kind, p.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `
INSERT INTO catalog_heads(kind, name, digest, retired) VALUES (?, ?, ?, 0)
ON CONFLICT(kind, name) DO UPDATE SET digest = excluded.digest, retired = 0`, p.Kind, p.Name, p.Digest); err != nil {
		return fmt.Errorf("register %s %q: %w", p.Kind, p.Name, err)
	}
	details := map[string]any{"name": p.Name, "digest": string(p.Digest), "action": c.Action, "size": int64(len(p.Content))}
	if c.Previous != "" {
		details["previous"] = string(c.Previous)
	}
	if len(p.Meta.AllowedCredentialPatterns) > 0 {
		details["allowed_credential_patterns"] = p.Meta.AllowedCredentialPatterns
	}
	if len(p.Meta.Bindings) > 0 {
		// Who allowed a secret to be sent where is part of the record (hosts and header
		// names only; the value is never here).
		bound := make(map[string]any, len(p.Meta.Bindings))
		for k, b := range p.Meta.Bindings {
			bound[k] = map[string]any{"hosts": b.Hosts, "headers": b.Headers}
		}
		details["bindings"] = bound
	}
	if len(p.Meta.Capabilities) > 0 {
		pins := make([]any, len(p.Meta.Capabilities))
		for i, pin := range p.Meta.Capabilities {
			pins[i] = pin.Name + "@" + string(pin.Digest)
		}
		details["capabilities"] = pins
	}
	// string(p.Kind): Kind's String is the noun for people ("env bundle"), not an identifier.
	_, err = w.log.Append(ctx, tx, audit.Entry{
		Actor:   actor,
		Kind:    entry.Catalog(string(p.Kind), verb),
		Subject: entry.CatalogItem(string(p.Kind), p.Name),
		Details: details,
	})
	return err
}

func (w *Writer) retire(ctx context.Context, tx *sql.Tx, actor, at string, c Change) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE catalog_heads SET retired = 1 WHERE kind = ? AND name = ? AND retired = 0`, c.Kind, c.Name)
	if err != nil {
		return false, fmt.Errorf("retire %s %q: %w", c.Kind, c.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil // already retired or gone: nothing to record
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO catalog_history(kind, name, action, digest, at, actor) VALUES (?, ?, 'retire', ?, ?, ?)`,
		c.Kind, c.Name, c.Previous, at, actor); err != nil {
		return false, fmt.Errorf("retire %s %q: %w", c.Kind, c.Name, err)
	}
	_, err = w.log.Append(ctx, tx, audit.Entry{
		Actor:   actor,
		Kind:    entry.Catalog(string(c.Kind), "retire"),
		Subject: entry.CatalogItem(string(c.Kind), c.Name),
		Details: map[string]any{"name": c.Name, "previous": string(c.Previous)},
	})
	return err == nil, err
}

// Register stores one pending version (a no-op when it is already the latest) and returns what
// happened and the version as stored. verb names the audit entry: "register" or "assign".
func (w *Writer) Register(ctx context.Context, actor, verb string, p *Pending) (Change, catalog.Version, error) {
	changes, err := w.Plan(ctx, []*Pending{p}, false)
	if err != nil {
		return Change{}, catalog.Version{}, err
	}
	done, err := w.Apply(ctx, actor, verb, changes, nil)
	if err != nil {
		return Change{}, catalog.Version{}, err
	}
	v, err := w.reader.Resolve(ctx, p.Kind, p.Name+"@"+string(p.Digest))
	if err != nil {
		return Change{}, catalog.Version{}, err
	}
	return done[0], v, nil
}
