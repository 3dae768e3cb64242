package oidcauth_test

import (
	"context"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// TestRedTeam31_SubjectWithHiddenCharacters (red team #31): a token's sub becomes the audit
// actor (oidc:ISSUER#SUB), which `agora audit` and `agora dispatch show` print to a terminal
// as it is. A subject the provider signs holding a C1 control (U+009B is CSI in 8-bit
// terminals; U+0085 is NEL, a line break), a bidirectional override (U+202E reorders what is
// shown), a line separator or a zero-width character must not become an actor: it is refused
// like a subject with a C0 control.
func TestRedTeam31_SubjectWithHiddenCharacters(t *testing.T) {
	subs := []string{"svc-\u202egnp.exe", "svc-\u009b31mred", "svc-a\u0085FORGED", "svc-a\u2028b", "svc-a\u200bb", "svc-\U000e0041"}
	var svcs []oidctest.Service
	for _, s := range subs {
		svcs = append(svcs, oidctest.Service{ID: s, Secret: "hidden-secret", Groups: []string{"platform"}, Audience: []string{aud}})
	}
	p := oidctest.Start(t, oidctest.Config{Services: svcs})
	v := newVerifier(t, p.Issuer, time.Millisecond)
	for _, s := range subs {
		tok, err := p.TokenErr(s)
		if err != nil {
			t.Fatalf("the provider issued no token for %+q: %v", s, err)
			continue
		}
		id, err := v.Verify(context.Background(), tok)
		if err == nil {
			t.Errorf("subject %+q accepted as actor %+q with grant %+v", s, id.Actor(), id.Grant)
		}
	}
}
