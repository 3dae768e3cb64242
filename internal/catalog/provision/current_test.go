package provision_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/errclass"
)

// TestResolveCurrent: for a caller held to the catalog as people registered it now, a bare
// name and the current version's pin resolve; a superseded version is refused as invalid,
// saying to name the entry without a version; any version of a retired name is not found and
// lists the names that are registered. Resolve still reads every one of them.
func TestResolveCurrent(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	_, old := f.registerEnv(t, "ci", map[string]string{"A": "1"}, nil)
	_, cur := f.registerEnv(t, "ci", map[string]string{"A": "2"}, nil)
	_, gone := f.registerEnv(t, "gone", map[string]string{"B": "1"}, nil)

	for _, ref := range []string{"ci", cur.Ref()} {
		if v, err := f.r.ResolveCurrent(ctx, catalog.KindEnv, ref); err != nil || v.Digest != cur.Digest {
			t.Errorf("ResolveCurrent(%s) = %s, %v; want the current version", ref, v.Digest, err)
		}
	}
	_, err := f.r.ResolveCurrent(ctx, catalog.KindEnv, old.Ref())
	var nc *view.NotCurrentError
	if !errors.As(err, &nc) || nc.Retired || errclass.Of(err) != errclass.Invalid ||
		!strings.Contains(err.Error(), `env bundle "ci": version `+string(old.Digest)+" is not its current one") ||
		!strings.Contains(err.Error(), "without a version") {
		t.Errorf("ResolveCurrent(superseded) = %v, want an invalid NotCurrentError saying to name it without a version", err)
	}

	p := prepareEnv(t, f, "ci", map[string]string{"A": "2"})
	changes, err := f.w.Plan(ctx, []*provision.Pending{p}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.w.Apply(ctx, "pruner", "apply", changes, nil); err != nil {
		t.Fatal(err)
	}
	_, err = f.r.ResolveCurrent(ctx, catalog.KindEnv, gone.Ref())
	if !errors.Is(err, view.ErrNotFound) || errclass.Of(err) != errclass.NotFound ||
		!strings.Contains(err.Error(), `env bundle "gone" not found; known: ci`) || !strings.Contains(err.Error(), "without a version") {
		t.Errorf("ResolveCurrent(retired) = %v, want not found, listing ci, saying to name one without a version", err)
	}
	for _, v := range []catalog.Version{old, gone} {
		if got, err := f.r.Resolve(ctx, catalog.KindEnv, v.Ref()); err != nil || got.Digest != v.Digest {
			t.Errorf("Resolve(%s) = %v, want the version still readable", v.Ref(), err)
		}
	}
}

func prepareEnv(t *testing.T, f *fixture, name string, values map[string]string) *provision.Pending {
	t.Helper()
	p, err := f.w.PrepareEnv(name, values, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
