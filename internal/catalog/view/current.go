package view

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/errclass"
)

// ResolveCurrent is [Catalog.Resolve] for a caller that starts new work on the catalog as
// people registered it now (an MCP client, a plan at submit: docs/adr/0025): a pinned version
// (NAME@sha256:HEX) is refused with a [NotCurrentError] unless it is the name's current one,
// so neither a superseded version (a subagent's wider capabilities, an env bundle's old
// values, a workspace's old patterns) nor any version of a retired name starts anything. A
// bare NAME resolves as Resolve does. Work that inherits its versions (a resumed dispatch's
// child, a run's tasks, a record being read) uses Resolve.
func (r *Catalog) ResolveCurrent(ctx context.Context, kind catalog.Kind, ref string) (catalog.Version, error) {
	v, err := r.Resolve(ctx, kind, ref)
	if err != nil || !strings.Contains(ref, "@") {
		return v, err
	}
	cur, err := r.Resolve(ctx, kind, v.Name)
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf):
		return catalog.Version{}, &NotCurrentError{Kind: kind, Name: v.Name, Digest: v.Digest, Retired: true, Known: nf.Known}
	case err != nil:
		return catalog.Version{}, err
	case cur.Digest != v.Digest:
		return catalog.Version{}, &NotCurrentError{Kind: kind, Name: v.Name, Digest: v.Digest}
	}
	return v, nil
}

// NotCurrentError is a pinned version a caller held to the current catalog may not use: one
// people superseded since (Invalid), or one of a name they retired (NotFound, which lists the
// names that are registered, as an unknown name's error does). Either way it says to name the
// entry without a version.
type NotCurrentError struct {
	Kind    catalog.Kind
	Name    string
	Digest  digest.Digest
	Retired bool
	Known   []string // the active names of Kind, when Retired
}

func (e *NotCurrentError) Error() string {
	if e.Retired {
		nf := &NotFoundError{Kind: e.Kind, Ref: e.Name, Known: e.Known}
		if len(e.Known) == 0 {
			return nf.Error() + " (people retired it; a pinned version starts no new work)"
		}
		return nf.Error() + fmt.Sprintf(" (people retired it; a pinned version starts no new work: name a known %s without a version)", e.Kind)
	}
	return fmt.Sprintf("%s %q: version %s is not its current one (people changed it since); name the %s without a version",
		e.Kind, e.Name, e.Digest, e.Kind)
}

// Is matches [ErrNotFound] when the name is retired.
func (e *NotCurrentError) Is(target error) bool { return e.Retired && target == ErrNotFound }

// Class is errclass.NotFound for a retired name and errclass.Invalid for a superseded version.
func (e *NotCurrentError) Class() errclass.Class {
	if e.Retired {
		return errclass.NotFound
	}
	return errclass.Invalid
}
