package oidcauth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agora-dev/agora/internal/oidcauth"

	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// TestRedTeam31_SubjectWithHiddenCharacters: a token's sub becomes the audit
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

// claimIssuer is an issuer whose signing key the test holds, so it can sign the claims a real
// provider would not emit (nbf, a groups string, duplicate members): the discovery document
// and JWKS are served as a provider serves them; only the claims are the test's.
type claimIssuer struct {
	url  string
	key  *rsa.PrivateKey
	jwks atomic.Int64 // JWKS fetches
	// jwksURI, when set, is what discovery names instead of the issuer's own /jwks.
	jwksURI string
}

func newClaimIssuer(t *testing.T) *claimIssuer {
	t.Helper()
	ci := &claimIssuer{}
	ci.key, _ = rsa.GenerateKey(rand.Reader, 2048)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			uri := ci.jwksURI
			if uri == "" {
				uri = ci.url + "/jwks"
			}
			json.NewEncoder(w).Encode(map[string]string{"issuer": ci.url, "jwks_uri": uri})
		case "/jwks":
			ci.jwks.Add(1)
			json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &ci.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ci.url = srv.URL
	return ci
}

// token signs the JSON payload raw with the issuer's key (kid k1) and extra headers.
func (ci *claimIssuer) token(t *testing.T, raw string, headers map[jose.HeaderKey]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader("kid", "k1")
	for k, v := range headers {
		opts = opts.WithHeader(k, v)
	}
	return sign2(t, ci.key, opts, []byte(raw))
}

func sign2(t *testing.T, key *rsa.PrivateKey, opts *jose.SignerOptions, payload []byte) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, opts)
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

// TestRedTeam31_Claims: what a token's claims may do once its signature is
// good. Each case is signed by the configured issuer's own key.
func TestRedTeam31_Claims(t *testing.T) {
	ci := newClaimIssuer(t)
	now := time.Now()
	cfg := config(ci.url)
	cfg.ClockSkew = 30 * time.Second
	cfg.Rules = append(cfg.Rules, oidcauth.Rule{Subject: "alice", Ceiling: "dispatch"})
	v, err := oidcauth.New(cfg, oidcauth.Options{Now: func() time.Time { return now }, RefetchEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	exp := now.Add(time.Hour).Unix()
	payload := func(extra string) string {
		return fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q,"exp":%d%s}`, ci.url, aud, exp, extra)
	}
	ok := func(raw, ceiling string) {
		t.Helper()
		id, err := v.Verify(context.Background(), ci.token(t, raw, nil))
		if err != nil || id.Grant.Ceiling != ceiling {
			t.Errorf("%s: got %+v, %v; want ceiling %q", raw, id.Grant, err, ceiling)
		}
	}
	bad := func(raw, want string) {
		t.Helper()
		mustInvalid(t, v, ci.token(t, raw, nil), want)
	}
	ok(payload(""), "")                                             // valid, no group: nothing
	ok(payload(`,"groups":["platform"]`), "orchestrate")            // the list form
	ok(payload(`,"groups":"readers"`), "read")                      // a single group as a string
	ok(payload(`,"groups":["Platform","PLATFORM"]`), "")            // groups are matched exactly
	ok(payload(`,"groups":["platform "]`), "")                      // no trimming
	ok(payload(`,"groups":["plаtform"]`), "")                       // a Cyrillic a
	ok(payload(`,"Groups":["platform"]`), "")                       // the claim's name is exact
	bad(payload(`,"grouPs":["platform"],"groups":[]`), "duplicate") // nor case-folded: a duplicate
	bad(payload(`,"groups":"platform","groups":"x"`), "")           // a duplicate member
	bad(payload(`,"groups":[["platform"]]`), "groups")              // a nested list
	bad(payload(`,"groups":{"platform":true}`), "groups")           // an object
	ok(strings.Replace(payload(""), `"sub":"svc"`, `"sub":"alice"`, 1), "dispatch")
	ok(strings.Replace(payload(""), `"sub":"svc"`, `"sub":"Alice"`, 1), "") // subjects are exact
	bad(strings.Replace(payload(""), `"sub":"svc"`, `"sub":"svc","sub":"alice"`, 1), "")
	bad(strings.Replace(payload(""), `"sub":"svc"`, `"sub":"a\nb"`, 1), "sub must be")
	bad(strings.Replace(payload(""), `"sub":"svc"`, `"sub":""`, 1), "sub must be")
	bad(strings.Replace(payload(""), `"sub":"svc"`, `"sub":"`+strings.Repeat("s", 256)+`"`, 1), "sub must be")
	// Audience: exact, in a string or a list; an array holding agora's audience beside
	// another client's is accepted (RFC 7519 §4.1.3), one without it is not.
	aud2 := func(v string) string {
		return strings.Replace(payload(""), fmt.Sprintf(`"aud":%q`, aud), `"aud":`+v, 1)
	}
	ok(aud2(`["someone-else","`+aud+`"]`), "")
	bad(aud2(`["someone-else"]`), "audience")
	bad(aud2(`"AGORA-TEST"`), "audience")
	bad(aud2(`"`+aud+` "`), "audience")
	bad(aud2(`[]`), "audience")
	bad(aud2(`""`), "audience")
	bad(strings.Replace(payload(""), fmt.Sprintf(`"aud":%q,`, aud), "", 1), "audience")
	bad(aud2(`{"`+aud+`":1}`), "aud")
	// Issuer: exact.
	bad(strings.Replace(payload(""), fmt.Sprintf(`"iss":%q`, ci.url), fmt.Sprintf(`"iss":%q`, ci.url+"/"), 1), "issued by")
	bad(strings.Replace(payload(""), fmt.Sprintf(`"iss":%q`, ci.url), `"iss":"HTTP://`+strings.TrimPrefix(ci.url, "http://")+`"`, 1), "issued by")
	// Times: exp within the skew passes, beyond it fails; nbf likewise; exp is required.
	times := func(e, nbf int64) string {
		s := fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q,"exp":%d`, ci.url, aud, e)
		if nbf != 0 {
			s += fmt.Sprintf(`,"nbf":%d`, nbf)
		}
		return s + "}"
	}
	ok(times(now.Add(-10*time.Second).Unix(), 0), "")
	bad(times(now.Add(-31*time.Second).Unix(), 0), "expired")
	ok(times(exp, now.Add(10*time.Second).Unix()), "")
	bad(times(exp, now.Add(2*time.Minute).Unix()), "not valid before")
	bad(fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q}`, ci.url, aud), "exp is required")
	bad(strings.Replace(times(exp, 0), fmt.Sprint(exp), "1e300", 1), "exp")
	bad(strings.Replace(times(exp, 0), fmt.Sprint(exp), "-1", 1), "exp")
	bad(strings.Replace(times(exp, 0), fmt.Sprint(exp), `"soon"`, 1), "")
	// RFC 7519: a NumericDate is a JSON number; a string holding one is refused, for exp,
	// nbf and iat alike. iat ahead of now beyond the skew (a token minted a day ahead) is
	// refused as not yet valid; within the skew, or in the past, it passes.
	bad(strings.Replace(times(exp, 0), fmt.Sprint(exp), fmt.Sprintf(`"%d"`, exp), 1), "RFC 7519 NumericDate")
	bad(times(exp, 0)[:len(times(exp, 0))-1]+fmt.Sprintf(`,"nbf":"%d"}`, now.Unix()), "nbf")
	iat := func(at time.Time) string {
		return times(exp, 0)[:len(times(exp, 0))-1] + fmt.Sprintf(`,"iat":%d}`, at.Unix())
	}
	bad(times(exp, 0)[:len(times(exp, 0))-1]+fmt.Sprintf(`,"iat":"%d"}`, now.Unix()), "iat")
	bad(iat(now.Add(24*time.Hour)), "not valid before")
	bad(iat(now.Add(2*time.Minute)), "issued ahead of time")
	ok(iat(now.Add(10*time.Second)), "")
	ok(iat(now.Add(-time.Hour)), "")
}

// TestRedTeam31_KeyHeaders: a token's header cannot choose the key. jku, x5u,
// x5c and an embedded jwk naming the attacker's key, with the provider's kid or a kid of the
// attacker's, are never fetched nor used; a header naming the provider's kid under another
// algorithm family is refused.
func TestRedTeam31_KeyHeaders(t *testing.T) {
	ci := newClaimIssuer(t)
	mine, _ := rsa.GenerateKey(rand.Reader, 2048)
	var fetched atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &mine.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	}))
	defer evil.Close()
	v := newVerifier(t, ci.url, time.Millisecond)
	good := fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q,"exp":%d,"groups":["platform"]}`, ci.url, aud, time.Now().Add(time.Hour).Unix())
	if _, err := v.Verify(context.Background(), ci.token(t, good, nil)); err != nil {
		t.Fatal(err)
	}
	for _, kid := range []string{"k1", "evil"} {
		for _, h := range []jose.HeaderKey{"jku", "x5u"} {
			opts := (&jose.SignerOptions{}).WithHeader("kid", kid).WithHeader(h, evil.URL+"/jwks")
			mustInvalid(t, v, sign2(t, mine, opts, []byte(good)), "")
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the verifier fetched the attacker's jku/x5u %d times", n)
	}
}

// TestRedTeam31_DiscoveryPointsElsewhere: the discovery document names the key
// set's URL; one pointing at the cloud metadata address, a private address, plain http to
// another host, or a loopback port outside the allow-list is refused, and no token verifies.
func TestRedTeam31_DiscoveryPointsElsewhere(t *testing.T) {
	for _, uri := range []string{"http://169.254.169.254/latest/meta-data/", "https://10.0.0.1/jwks", "http://example.com/jwks",
		"http://127.0.0.2:1/jwks", "file:///etc/passwd", "https://user:pw@example.com/jwks"} {
		ci := newClaimIssuer(t)
		ci.jwksURI = uri
		v := newVerifier(t, ci.url, time.Millisecond)
		good := fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q,"exp":%d,"groups":["platform"]}`, ci.url, aud, time.Now().Add(time.Hour).Unix())
		id, err := v.Verify(context.Background(), ci.token(t, good, nil))
		if err == nil || !errors.Is(err, oidcauth.ErrProvider) {
			t.Errorf("jwks_uri %s: got %+v, %v; want the provider refused", uri, id, err)
		}
	}
}

// TestRedTeam31_SameKidAnotherIssuer: a second issuer publishing the same key
// id (k1) with its own key signs a token naming the first issuer: the first issuer's verifier
// checks it with its own k1 and refuses it, and never asks the second issuer for keys.
func TestRedTeam31_SameKidAnotherIssuer(t *testing.T) {
	first, second := newClaimIssuer(t), newClaimIssuer(t)
	v := newVerifier(t, first.url, time.Millisecond)
	for _, iss := range []string{first.url, second.url} {
		raw := fmt.Sprintf(`{"iss":%q,"sub":"svc","aud":%q,"exp":%d,"groups":["platform"]}`, iss, aud, time.Now().Add(time.Hour).Unix())
		mustInvalid(t, v, second.token(t, raw, nil), "")
	}
	if n := second.jwks.Load(); n != 0 {
		t.Errorf("the other issuer's key set was fetched %d times", n)
	}
}

// TestRedTeam31_RotationUnderAKidStorm: an unauthenticated client sending
// tokens with ever new key ids spends every refetch the rate limit allows. When the provider
// then rotates its key, a real token of the new key may be refused while the limit is spent,
// but never for longer than one refill: each refetch, the attacker's included, loads the
// provider's current key set, so the storm cannot keep the new key out.
func TestRedTeam31_RotationUnderAKidStorm(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: services()})
	const every = 300 * time.Millisecond
	v := newVerifier(t, p.Issuer, every)
	ctx := context.Background()
	if _, err := v.Verify(ctx, p.Token(t, "svc-platform")); err != nil {
		t.Fatal(err)
	}
	mine, _ := rsa.GenerateKey(rand.Reader, 2048)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v.Verify(ctx, sign(t, mine, jose.RS256, fmt.Sprintf("storm-%d", i), claims(p.Issuer)))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()
	time.Sleep(every) // the storm has spent the burst
	p.Rotate(t, true)
	fresh := p.Token(t, "svc-platform")
	deadline := time.Now().Add(20 * every)
	var err error
	for time.Now().Before(deadline) {
		if _, err = v.Verify(ctx, fresh); err == nil {
			return
		}
		time.Sleep(every / 3)
	}
	t.Fatalf("a token of the rotated-in key was still refused after %s of the storm: %v", 20*every, err)
}
