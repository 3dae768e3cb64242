package provision_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
)

// TestAttack_PinsSpellingsOfASupersededVersion: a caller held to the current catalog
// spells a superseded version's pin every way a parser might read apart from the resolver
// (upper-case hex, another prefix, a short digest, white space, a second pin after the
// first, a look-alike name, "latest"). None resolves to the superseded version: each is
// refused, or (a spelling that names the current entry) resolves to the current version.
func TestAttack_PinsSpellingsOfASupersededVersion(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	_, old := f.registerEnv(t, "ci", map[string]string{"A": "1"}, nil)
	_, cur := f.registerEnv(t, "ci", map[string]string{"A": "2"}, nil)
	oldHex := old.Digest.Hex()

	for _, ref := range []string{
		"ci@sha256:" + strings.ToUpper(oldHex),
		"ci@SHA256:" + oldHex,
		"ci@" + oldHex,
		"ci@sha256:" + oldHex[:12],
		"ci@sha256:" + oldHex + "0",
		"ci@sha256: " + oldHex,
		" ci@sha256:" + oldHex,
		"ci@sha256:" + oldHex + " ",
		"ci@sha256:" + oldHex + "\n",
		"ci @sha256:" + oldHex,
		"ci@sha256:" + oldHex + "@" + string(cur.Digest),
		cur.Ref() + "@" + string(old.Digest),
		"ci@@sha256:" + oldHex,
		"ci@sha512:" + oldHex + oldHex,
		"ci@sha256\uff1a" + oldHex, // a full-width colon
		"\u0441i@sha256:" + oldHex, // a Cyrillic es for the c
		"CI@sha256:" + oldHex,
		"ci@latest",
		"ci@",
		"@sha256:" + oldHex,
		"sha256:" + oldHex,
	} {
		v, err := f.r.ResolveCurrent(ctx, catalog.KindEnv, ref)
		if err == nil && v.Digest != cur.Digest {
			t.Errorf("ResolveCurrent(%q) = %s, want it refused or the current version", ref, v.Digest)
		}
	}
	// People register the old values again: the old version is the current one once more,
	// and its pin resolves; the version in between is now the superseded one.
	f.registerEnv(t, "ci", map[string]string{"A": "1"}, nil)
	if v, err := f.r.ResolveCurrent(ctx, catalog.KindEnv, old.Ref()); err != nil || v.Digest != old.Digest {
		t.Errorf("the version people registered again: %s, %v; want it current", v.Digest, err)
	}
	if _, err := f.r.ResolveCurrent(ctx, catalog.KindEnv, cur.Ref()); err == nil {
		t.Errorf("the version people replaced by registering the old values again still resolves")
	}
}
