package oidcauth_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/oidcauth"
)

// exp/nbf/iat (claims.go jsonNumber/numericDate, verifier.go notBefore,
// checkTimes), in every number form RFC 8259 allows, and through the token cache.
func TestRedTeam46xTimes_NumberForms(t *testing.T) {
	ci := newClaimIssuer(t)
	now := time.Unix(1_700_000_000, 0)
	cfg := config(ci.url)
	cfg.ClockSkew = 30 * time.Second
	v, err := oidcauth.New(cfg, oidcauth.Options{Now: func() time.Time { return now }, RefetchEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	oidcauth.DisableTokenCache(v)
	tok := func(extra string) string {
		return ci.token(t, fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q%s}`, ci.url, aud, extra), nil)
	}
	ok := func(extra string) {
		t.Helper()
		if _, err := v.Verify(context.Background(), tok(extra)); err != nil {
			t.Errorf("%s: %v, want accepted", extra, err)
		}
	}
	bad := func(extra, want string) {
		t.Helper()
		mustInvalid(t, v, tok(extra), want)
	}
	const exp = `,"exp":1700003600`
	// exp in exponent and fraction forms means the same second.
	ok(`,"exp":1.7000036e9`)
	ok(`,"exp":17000036E2`)
	ok(`,"exp":1700003600.000`)
	bad(`,"exp":1.6999e9`, "expired")
	bad(`,"exp":-0`, "expired")
	bad(`,"exp":0`, "expired")
	bad(`,"exp":1e-7`, "expired")
	bad(`,"exp":-0.0e0`, "expired")
	bad(`,"exp":1e400`, "")   // beyond float64: strictjson
	bad(`,"exp":1e12`, "exp") // beyond 1e11
	bad(`,"exp":-1e-400`, "")
	// nbf/iat: a future one in exponent form is refused like its integer form.
	bad(exp+`,"iat":1.7000002e9`, "not valid before") // now + 200s
	bad(exp+`,"nbf":1.7000002e9`, "not valid before")
	bad(exp+`,"iat":1e11`, "not valid before")
	bad(exp+`,"iat":99999999999.99999`, "not valid before")
	bad(exp+`,"iat":1e12`, "iat")
	bad(exp+`,"iat":-1`, "iat")
	bad(exp+`,"iat":true`, "iat")
	bad(exp+`,"iat":[1]`, "iat")
	bad(exp+`,"iat":{}`, "iat")
	// Fractional iat just beyond the skew: refused (30.5s > 30s).
	bad(exp+`,"iat":1700000030.5`, "not valid before")
	ok(exp + `,"iat":1700000029.999`)
	// A past nbf with a future iat: the later wins.
	bad(exp+`,"nbf":1,"iat":1700000100`, "not valid before")
	bad(exp+`,"nbf":1700000100,"iat":1`, "not valid before")
	// Negative zero and tiny iat are the epoch: the past.
	ok(exp + `,"iat":-0`)
	ok(exp + `,"iat":-0.0`)
	ok(exp + `,"nbf":-0E5`)
	ok(exp + `,"iat":1e-9`)
	ok(exp + `,"iat":null,"nbf":null`)
	// iat far in the past is accepted (no maximum age): RFC 7519 sets none.
	ok(exp + `,"iat":1`)
}

// TestRedTeam46xTimes_CachedTokenRechecksIat: a token accepted (and cached) while its iat was
// within the skew is refused on a later call when the clock has gone back beyond it; the
// cache keeps the not-before and checkTimes applies it on every hit.
func TestRedTeam46xTimes_CachedTokenRechecksIat(t *testing.T) {
	ci := newClaimIssuer(t)
	now := time.Unix(1_700_000_000, 0)
	cfg := config(ci.url)
	cfg.ClockSkew = 30 * time.Second
	v, err := oidcauth.New(cfg, oidcauth.Options{Now: func() time.Time { return now }, RefetchEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// iat 20s ahead (within the skew), in exponent form, no nbf.
	tok := ci.token(t, fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q,"exp":1700003600,"iat":1.70000002e9}`, ci.url, aud), nil)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-20 * time.Second) // iat now 40s ahead
	mustInvalid(t, v, tok, "not valid before")
	now = now.Add(20 * time.Second)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("back within the skew: %v", err)
	}
	// A token refused for its iat is not cached as refused: once the clock reaches it, it
	// passes (and then is cached with its not-before).
	tok2 := ci.token(t, fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q,"exp":1700003600,"iat":1700000100}`, ci.url, aud), nil)
	mustInvalid(t, v, tok2, "not valid before")
	now = now.Add(90 * time.Second)
	if _, err := v.Verify(context.Background(), tok2); err != nil {
		t.Fatalf("once its iat is within the skew: %v", err)
	}
	now = now.Add(-90 * time.Second)
	mustInvalid(t, v, tok2, "not valid before")
	// exp through the cache, at the boundary: exp + skew is refused.
	now = time.Unix(1_700_003_600+30, 0)
	mustInvalid(t, v, tok, "expired")
}
