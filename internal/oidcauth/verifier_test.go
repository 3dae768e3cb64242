package oidcauth_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

const aud = "agora-test"

func services() []oidctest.Service {
	return []oidctest.Service{
		{ID: "svc-platform", Secret: "platform-secret", Groups: []string{"platform"}, Audience: []string{aud}},
		{ID: "svc-readers", Secret: "readers-secret", Groups: []string{"readers"}, Audience: []string{aud}},
		{ID: "svc-nobody", Secret: "nobody-secret", Groups: []string{"marketing"}, Audience: []string{aud}},
		{ID: "svc-otheraud", Secret: "otheraud-secret", Groups: []string{"platform"}, Audience: []string{"someone-else"}},
		{ID: "svc-expired", Secret: "expired-secret", Groups: []string{"platform"}, Audience: []string{aud}, TTL: -time.Hour},
	}
}

func config(issuer string) oidcauth.Config {
	return oidcauth.Config{Issuer: issuer, Audience: aud, AllowPrivate: []string{"127.0.0.1/32"},
		Rules: []oidcauth.Rule{
			{Group: "platform", Ceiling: "orchestrate", Web: "operator"},
			{Group: "readers", Ceiling: "read", Web: "viewer"},
		}}
}

func newVerifier(t *testing.T, issuer string, every time.Duration) *oidcauth.Verifier {
	t.Helper()
	v, err := oidcauth.New(config(issuer), oidcauth.Options{RefetchEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustInvalid(t *testing.T, v *oidcauth.Verifier, tok, want string) {
	t.Helper()
	id, err := v.Verify(context.Background(), tok)
	if !errors.Is(err, oidcauth.ErrInvalid) {
		t.Fatalf("want ErrInvalid (%s), got %+v, %v", want, id, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if strings.Contains(err.Error(), tok) {
		t.Fatal("the error repeats the token")
	}
}

// TestVerifyAgainstRealProvider runs every case against the real provider: a valid token
// and its grant and actor, claims matching no rule, a wrong audience, an expired token, a token
// from another issuer, and a rotated key.
func TestVerifyAgainstRealProvider(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: services()})
	ctx := context.Background()
	v := newVerifier(t, p.Issuer, time.Millisecond)

	id, err := v.Verify(ctx, p.Token(t, "svc-platform"))
	if err != nil {
		t.Fatal(err)
	}
	if id.Grant != (oidcauth.Grant{Ceiling: "orchestrate", Web: "operator"}) {
		t.Fatalf("grant %+v", id.Grant)
	}
	if got, want := id.Actor(), "oidc:"+p.Issuer+"#svc-platform"; got != want {
		t.Fatalf("actor %q, want %q", got, want)
	}
	if id, err := v.Verify(ctx, p.Token(t, "svc-readers")); err != nil || id.Grant != (oidcauth.Grant{Ceiling: "read", Web: "viewer"}) {
		t.Fatalf("readers: %+v %v", id, err)
	}

	t.Run("claims matching no rule get nothing", func(t *testing.T) {
		id, err := v.Verify(ctx, p.Token(t, "svc-nobody"))
		if err != nil {
			t.Fatal(err)
		}
		if !id.Grant.Empty() {
			t.Fatalf("default deny broken: %+v", id.Grant)
		}
	})
	t.Run("wrong audience", func(t *testing.T) {
		mustInvalid(t, v, p.Token(t, "svc-otheraud"), `audience is not "agora-test"`)
	})
	t.Run("expired", func(t *testing.T) {
		mustInvalid(t, v, p.Token(t, "svc-expired"), "expired at")
	})
	t.Run("another issuer", func(t *testing.T) {
		other := oidctest.Start(t, oidctest.Config{Services: services()})
		mustInvalid(t, v, other.Token(t, "svc-platform"), "unknown key")
		// Even were its key known (a verifier of both), the issuer must match.
		vo := newVerifier(t, other.Issuer, time.Millisecond)
		if _, err := vo.Verify(ctx, other.Token(t, "svc-platform")); err != nil {
			t.Fatal(err)
		}
		mustInvalid(t, vo, forgeIss(t, other, p.Issuer), "")
	})
	t.Run("rotated key", func(t *testing.T) {
		old := p.Token(t, "svc-platform")
		p.Rotate(t, false)
		fresh := p.Token(t, "svc-platform")
		if kid(t, fresh) == kid(t, old) {
			t.Fatal("rotation kept the key id")
		}
		if _, err := v.Verify(ctx, fresh); err != nil {
			t.Fatalf("a token of the rotated-in key: %v", err)
		}
		if _, err := v.Verify(ctx, old); err != nil {
			t.Fatalf("the old key is still published, its token still valid: %v", err)
		}
		// The provider retires the old key: once agora refetches (the next unknown key id),
		// a token signed with it is refused.
		p.Rotate(t, true)
		newest := p.Token(t, "svc-platform")
		if _, err := v.Verify(ctx, newest); err != nil {
			t.Fatal(err)
		}
		mustInvalid(t, v, old, "unknown key")
	})
}

// TestRefetchIsRateLimited: tokens naming ever new key ids cannot make agora fetch the key
// set once per request (an attack on the provider, and on agora's latency).
func TestRefetchIsRateLimited(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: services()})
	v := newVerifier(t, p.Issuer, time.Hour)
	if _, err := v.Verify(context.Background(), p.Token(t, "svc-platform")); err != nil {
		t.Fatal(err)
	}
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	var last error
	for i := range 5 {
		tok := sign(t, key, jose.RS256, "random-kid-"+string(rune('a'+i)), claims(p.Issuer))
		_, last = v.Verify(context.Background(), tok)
		if !errors.Is(last, oidcauth.ErrInvalid) {
			t.Fatalf("forged kid: %v", last)
		}
	}
	if !strings.Contains(last.Error(), "refetched too recently") {
		t.Fatalf("the sixth unknown key id was looked up again: %v", last)
	}
}

// TestAttacks are the forgeries an attacker tries first.
func TestAttacks(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: services()})
	v := newVerifier(t, p.Issuer, time.Millisecond)
	real := p.Token(t, "svc-platform")
	if _, err := v.Verify(context.Background(), real); err != nil {
		t.Fatal(err)
	}
	k := kid(t, real)
	body := claims(p.Issuer)

	t.Run("alg none", func(t *testing.T) {
		tok := b64(`{"alg":"none","kid":"`+k+`"}`) + "." + b64(string(body)) + "."
		mustInvalid(t, v, tok, "")
	})
	t.Run("HS256 keyed with the provider's public key", func(t *testing.T) {
		pub := providerKey(t, v, real)
		der, _ := x509.MarshalPKIXPublicKey(pub)
		for _, secret := range [][]byte{der, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})} {
			in := b64(`{"alg":"HS256","kid":"`+k+`","typ":"JWT"}`) + "." + b64(string(body))
			mac := hmac.New(sha256.New, secret)
			mac.Write([]byte(in))
			mustInvalid(t, v, in+"."+base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), "algorithm is not allowed")
		}
	})
	t.Run("kid confusion: the provider's kid, the attacker's key", func(t *testing.T) {
		mine, _ := rsa.GenerateKey(rand.Reader, 2048)
		mustInvalid(t, v, sign(t, mine, jose.RS256, k, body), "signature does not verify")
	})
	t.Run("embedded jwk header is not trusted", func(t *testing.T) {
		mine, _ := rsa.GenerateKey(rand.Reader, 2048)
		opts := (&jose.SignerOptions{EmbedJWK: true}).WithHeader("kid", k)
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: mine}, opts)
		if err != nil {
			t.Fatal(err)
		}
		jws, _ := s.Sign(body)
		tok, _ := jws.CompactSerialize()
		mustInvalid(t, v, tok, "")
	})
	t.Run("no kid", func(t *testing.T) {
		mine, _ := rsa.GenerateKey(rand.Reader, 2048)
		mustInvalid(t, v, sign(t, mine, jose.RS256, "", body), "names no key")
	})
	t.Run("huge token", func(t *testing.T) {
		mustInvalid(t, v, strings.Repeat("A", 1<<20)+".a.b", "longer than")
	})
	t.Run("a valid token with a tampered payload", func(t *testing.T) {
		parts := strings.Split(real, ".")
		raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
		tampered := strings.Replace(string(raw), `"svc-platform"`, `"svc-platformx"`, 1)
		mustInvalid(t, v, parts[0]+"."+b64(tampered)+"."+parts[2], "signature does not verify")
	})
	t.Run("two tokens glued", func(t *testing.T) {
		mustInvalid(t, v, real+"."+real, "not a compact JWS")
	})
	t.Run("a valid token with a space inside", func(t *testing.T) {
		// A bearer token is the compact form exactly: no whitespace is dropped before it
		// is read (go-jose's ParseSigned would drop it and accept the token).
		dot := strings.LastIndexByte(real, '.')
		mustInvalid(t, v, real[:dot+5]+" "+real[dot+5:], "not a well-formed signed token")
	})
}

// TestNoNetworkAtStart: New reads nothing; a provider that is down fails the token with
// ErrProvider, and the next token (once the provider is back) succeeds.
func TestNoNetworkAtStart(t *testing.T) {
	v, err := oidcauth.New(config("http://127.0.0.1:1"), oidcauth.Options{RefetchEvery: time.Millisecond})
	if err != nil {
		t.Fatalf("New must not touch the network: %v", err)
	}
	_, err = v.Verify(context.Background(), "a.b.c")
	if err == nil {
		t.Fatal("garbage accepted")
	}
	mine, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, err = v.Verify(context.Background(), sign(t, mine, jose.RS256, "k", claims("http://127.0.0.1:1")))
	if !errors.Is(err, oidcauth.ErrProvider) {
		t.Fatalf("want ErrProvider, got %v", err)
	}
}

func claims(issuer string) []byte {
	b, _ := json.Marshal(map[string]any{"iss": issuer, "sub": "svc-platform", "aud": []string{aud},
		"exp": time.Now().Add(time.Hour).Unix(), "groups": []string{"platform"}})
	return b
}

func sign(t *testing.T, key any, alg jose.SignatureAlgorithm, kid string, payload []byte) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func kid(t *testing.T, tok string) string {
	t.Helper()
	jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	return jws.Signatures[0].Protected.KeyID
}

// forgeIss re-signs nothing: it is a token of other's, valid there, whose iss is replaced.
// Its signature breaks, so it is refused either way; the point is it is never accepted.
func forgeIss(t *testing.T, other *oidctest.Provider, iss string) string {
	tok := other.Token(t, "svc-platform")
	parts := strings.Split(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var m map[string]any
	json.Unmarshal(raw, &m)
	m["iss"] = iss
	b, _ := json.Marshal(m)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
}

// providerKey fetches the provider's public key for tok's kid, as an attacker would.
func providerKey(t *testing.T, v *oidcauth.Verifier, tok string) *rsa.PublicKey {
	t.Helper()
	m, err := v.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	set := fetchJWKS(t, m.JWKSURI)
	for _, k := range set.Key(kid(t, tok)) {
		if pub, ok := k.Key.(*rsa.PublicKey); ok {
			return pub
		}
	}
	t.Fatal("the provider does not publish the token's key")
	return nil
}

// TestCachedTokenStillExpires: a token verified once is not good forever: the cache checks
// exp (with the skew) again on every request.
func TestCachedTokenStillExpires(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: services()})
	now := time.Now()
	cfg := config(p.Issuer)
	cfg.ClockSkew = time.Second
	v, err := oidcauth.New(cfg, oidcauth.Options{Now: func() time.Time { return now }, RefetchEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tok := p.Token(t, "svc-platform")
	id, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("second use: %v", err)
	}
	now = id.Expiry.Add(2 * time.Second)
	mustInvalid(t, v, tok, "expired at")
}
