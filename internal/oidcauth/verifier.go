package oidcauth

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/time/rate"

	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Limits on what the verifier reads.
const (
	// MaxTokenBytes bounds a presented token; a longer one is refused before it is parsed.
	MaxTokenBytes = 8 << 10
	// maxDocBytes bounds the discovery document and the JWKS.
	maxDocBytes  = 1 << 20
	fetchTimeout = 10 * time.Second
	// minRSABits is the smallest RSA key a signature is checked with.
	minRSABits = 2048
)

// ErrInvalid wraps every refusal of a token: a bad signature, a foreign issuer, a wrong
// audience, an expired token and the like. Its message never holds the token.
var ErrInvalid = errors.New("invalid token")

// ErrProvider says the provider could not be reached or answered something unusable; the
// token was not judged and may be retried.
var ErrProvider = errors.New("the OIDC provider is unavailable")

// Identity is who a valid token names and what the rules grant it.
type Identity struct {
	Issuer  string
	Subject string
	Groups  []string
	Expiry  time.Time
	Grant   Grant
}

// Actor is the name the audit records for id.
func (id Identity) Actor() string { return Actor(id.Issuer, id.Subject) }

// Metadata is what discovery found (OpenID Connect Discovery 1.0 §3).
type Metadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
}

// Verifier validates tokens from one provider. It is safe for concurrent use.
type Verifier struct {
	cfg    Config
	algs   []jose.SignatureAlgorithm
	client *http.Client
	now    func() time.Time

	// keys is the current JWKS by key id; nil until the first fetch.
	keys atomic.Pointer[map[string]jose.JSONWebKey]
	meta atomic.Pointer[Metadata]
	// fetchMu serializes fetches; fetches (discovery and JWKS alike) are rate-limited, so
	// tokens naming unknown key ids cannot make agora hammer the provider.
	fetchMu sync.Mutex
	fetches *rate.Limiter
	// gen counts key set fetches; cache holds verified tokens of the current one.
	gen     atomic.Uint64
	cache   tokenCache
	noCache bool
}

// Options tune a Verifier; the zero Options is production's.
type Options struct {
	// Now replaces time.Now.
	Now func() time.Time
	// RefetchEvery is the sustained rate of provider fetches (one per RefetchEvery, a burst
	// of 3); default 10s.
	RefetchEvery time.Duration
	// Resolver replaces egress's DNS resolver (tests).
	Resolver egress.Resolver
}

// New returns a verifier for cfg (which must have passed [Config.Validate]). It reads no
// network: discovery happens on the first token.
func New(cfg Config, o Options) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	prefixes, _ := cfg.prefixes()
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RefetchEvery <= 0 {
		o.RefetchEvery = 10 * time.Second
	}
	v := &Verifier{cfg: cfg, now: o.Now,
		client:  egress.NewDialer(egress.Policy{AllowPrivate: prefixes}, o.Resolver).Client(fetchTimeout),
		fetches: rate.NewLimiter(rate.Every(o.RefetchEvery), 3)}
	for _, a := range cfg.Algorithms {
		v.algs = append(v.algs, jose.SignatureAlgorithm(a))
	}
	return v, nil
}

// Config returns the verifier's (validated) config.
func (v *Verifier) Config() Config { return v.cfg }

// Verify validates token and returns its identity. A token that is well signed but whose
// claims match no rule is returned with an empty Grant: the caller refuses it (403), having
// learnt who was refused.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	if len(token) > MaxTokenBytes {
		return Identity{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxTokenBytes)
	}
	sum := sha256.Sum256([]byte(token))
	if id, nbf, ok := v.cache.get(sum, v.gen.Load()); ok && !v.noCache {
		return v.checkTimes(id, nbf)
	}
	gen := v.gen.Load()
	id, c, err := v.verify(ctx, token)
	if err != nil {
		return Identity{}, err
	}
	nbf := notBefore(c)
	if !v.noCache {
		v.cache.put(sum, gen, id, nbf)
	}
	return id, nil
}

// notBefore is when a token becomes valid: the later of its nbf and its iat (RFC 7519: a
// token issued after now, beyond the clock skew, was minted ahead of time, and passes no
// sooner than it says it was issued).
func notBefore(c claims) time.Time {
	if c.IssuedAt.After(c.NotBefore) {
		return c.IssuedAt
	}
	return c.NotBefore
}

// checkTimes applies exp and the token's not-before (nbf, iat), with the clock skew, to a
// cached identity.
func (v *Verifier) checkTimes(id Identity, nbf time.Time) (Identity, error) {
	now := v.now()
	if !now.Before(id.Expiry.Add(v.cfg.ClockSkew)) {
		return Identity{}, fmt.Errorf("%w: expired at %s", ErrInvalid, id.Expiry.UTC().Format(time.RFC3339))
	}
	if !nbf.IsZero() && now.Add(v.cfg.ClockSkew).Before(nbf) {
		return Identity{}, fmt.Errorf("%w: not valid before %s (its nbf or iat, beyond the %s clock skew: issued ahead of time)", ErrInvalid, nbf.UTC().Format(time.RFC3339), v.cfg.ClockSkew)
	}
	return id, nil
}

// verify is Verify without the cache; it also returns the token's claims.
func (v *Verifier) verify(ctx context.Context, token string) (Identity, claims, error) {
	if strings.Count(token, ".") != 2 {
		return Identity{}, claims{}, fmt.Errorf("%w: not a compact JWS", ErrInvalid)
	}
	// base64's decoder drops '\r' and '\n' wherever they are (every other byte outside
	// base64url it refuses), and go-jose re-encodes the header it decoded to check the
	// signature: a token with a line break would verify as the token without it.
	if strings.ContainsAny(token, "\r\n") {
		return Identity{}, claims{}, fmt.Errorf("%w: not a compact JWS (a line break inside)", ErrInvalid)
	}
	// ParseSignedCompact, not ParseSigned: a bearer token is the compact form only, and
	// ParseSigned would first copy the token rune by rune to drop whitespace (a tenth of a
	// token's first request) and would read a token opening with "{" as the JSON form.
	jws, err := jose.ParseSignedCompact(token, v.algs)
	if err != nil {
		return Identity{}, claims{}, fmt.Errorf("%w: %s", ErrInvalid, joseReason(err))
	}
	if len(jws.Signatures) != 1 {
		return Identity{}, claims{}, fmt.Errorf("%w: want exactly one signature", ErrInvalid)
	}
	h := jws.Signatures[0].Protected
	if h.KeyID == "" {
		return Identity{}, claims{}, fmt.Errorf("%w: the token names no key (kid)", ErrInvalid)
	}
	if len(h.ExtraHeaders) > 0 {
		for k := range h.ExtraHeaders {
			if k == "crit" {
				return Identity{}, claims{}, fmt.Errorf("%w: critical header extensions are not supported", ErrInvalid)
			}
		}
	}
	key, err := v.key(ctx, h.KeyID)
	if err != nil {
		return Identity{}, claims{}, err
	}
	if key.Algorithm != "" && key.Algorithm != h.Algorithm {
		return Identity{}, claims{}, fmt.Errorf("%w: key %q is for %s, the token says %s", ErrInvalid, clip(h.KeyID), key.Algorithm, h.Algorithm)
	}
	if key.Use != "" && key.Use != "sig" {
		return Identity{}, claims{}, fmt.Errorf("%w: key %q is not a signing key", ErrInvalid, clip(h.KeyID))
	}
	payload, err := jws.Verify(key.Key)
	if err != nil {
		return Identity{}, claims{}, fmt.Errorf("%w: the signature does not verify with key %q", ErrInvalid, clip(h.KeyID))
	}
	c, err := parseClaims(payload, v.cfg.GroupsClaim)
	if err != nil {
		return Identity{}, claims{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Issuer != v.cfg.Issuer {
		return Identity{}, claims{}, fmt.Errorf("%w: issued by %q, not %q", ErrInvalid, clip(c.Issuer), v.cfg.Issuer)
	}
	if !slices.Contains(c.Audience, v.cfg.Audience) {
		return Identity{}, claims{}, fmt.Errorf("%w: its audience is not %q", ErrInvalid, v.cfg.Audience)
	}
	id := Identity{Issuer: c.Issuer, Subject: c.Subject, Groups: c.Groups, Expiry: c.Expiry,
		Grant: v.cfg.grant(c.Subject, c.Groups)}
	if _, err := v.checkTimes(id, notBefore(c)); err != nil {
		return Identity{}, claims{}, err
	}
	return id, c, nil
}

// key returns the JWKS key kid, fetching the JWKS when it is not cached or does not hold kid
// (the provider rotated its keys), at most at the fetch rate.
func (v *Verifier) key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	if ks := v.keys.Load(); ks != nil {
		if k, ok := (*ks)[kid]; ok {
			return k, nil
		}
	}
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	if ks := v.keys.Load(); ks != nil { // another request may have fetched it meanwhile
		if k, ok := (*ks)[kid]; ok {
			return k, nil
		}
		if !v.fetches.Allow() {
			return jose.JSONWebKey{}, fmt.Errorf("%w: unknown key %q (the key set was refetched too recently to look again)", ErrInvalid, clip(kid))
		}
	} else if !v.fetches.Allow() {
		return jose.JSONWebKey{}, fmt.Errorf("%w: discovery failed recently; retrying shortly", ErrProvider)
	}
	if err := v.refresh(ctx); err != nil {
		return jose.JSONWebKey{}, err
	}
	if k, ok := (*v.keys.Load())[kid]; ok {
		return k, nil
	}
	return jose.JSONWebKey{}, fmt.Errorf("%w: unknown key %q: the provider does not publish it", ErrInvalid, clip(kid))
}

// Discover returns the provider's metadata, fetching it on first use (the web login needs
// its endpoints).
func (v *Verifier) Discover(ctx context.Context) (Metadata, error) {
	if m := v.meta.Load(); m != nil {
		return *m, nil
	}
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	if m := v.meta.Load(); m != nil {
		return *m, nil
	}
	if !v.fetches.Allow() {
		return Metadata{}, fmt.Errorf("%w: discovery failed recently; retrying shortly", ErrProvider)
	}
	m, err := v.discover(ctx)
	if err != nil {
		return Metadata{}, err
	}
	return m, nil
}

// discover fetches the discovery document once (caller holds fetchMu).
func (v *Verifier) discover(ctx context.Context) (Metadata, error) {
	if m := v.meta.Load(); m != nil {
		return *m, nil
	}
	var m Metadata
	body, err := v.get(ctx, strings.TrimSuffix(v.cfg.Issuer, "/")+"/.well-known/openid-configuration")
	if err != nil {
		return Metadata{}, err
	}
	if err := strictjson.UnmarshalKnown(body, &m); err != nil {
		return Metadata{}, fmt.Errorf("%w: discovery document: %v", ErrProvider, err)
	}
	// OpenID Connect Discovery §4.3: the issuer must be exactly the one asked for.
	if m.Issuer != v.cfg.Issuer {
		return Metadata{}, fmt.Errorf("%w: discovery names issuer %q, configured %q", ErrProvider, clip(m.Issuer), v.cfg.Issuer)
	}
	if err := checkIssuer(m.JWKSURI); err != nil {
		return Metadata{}, fmt.Errorf("%w: jwks_uri: %v", ErrProvider, err)
	}
	v.meta.Store(&m)
	return m, nil
}

// refresh fetches discovery (once) and the JWKS (caller holds fetchMu).
func (v *Verifier) refresh(ctx context.Context) error {
	m, err := v.discover(ctx)
	if err != nil {
		return err
	}
	body, err := v.get(ctx, m.JWKSURI)
	if err != nil {
		return err
	}
	keys, err := parseKeySet(body)
	if err != nil {
		return err
	}
	v.keys.Store(&keys)
	v.gen.Add(1) // tokens verified against the old set are verified again
	return nil
}

// parseKeySet reads a JWKS (RFC 7517 §5) exactly (strictjson: no duplicate member names), keeps
// the public signing keys with a key id, and refuses a set naming one key id twice (which
// key would a token's kid mean?). Keys of a type go-jose does not know, symmetric and private
// keys are left out: none is ever a verification key here.
func parseKeySet(body []byte) (map[string]jose.JSONWebKey, error) {
	var doc struct {
		Keys []jsonRaw `json:"keys"`
	}
	if err := strictjson.UnmarshalKnown(body, &doc); err != nil {
		return nil, fmt.Errorf("%w: key set: %v", ErrProvider, err)
	}
	keys := make(map[string]jose.JSONWebKey, len(doc.Keys))
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		if k.KeyID == "" || !k.IsPublic() || !k.Valid() {
			continue
		}
		if pub, ok := k.Key.(*rsa.PublicKey); ok && pub.N.BitLen() < minRSABits {
			continue // a key a forger could factor is no key
		}
		if _, dup := keys[k.KeyID]; dup {
			return nil, fmt.Errorf("%w: key set lists key %q twice", ErrProvider, clip(k.KeyID))
		}
		keys[k.KeyID] = k
	}
	return keys, nil
}

type jsonRaw []byte

func (r *jsonRaw) UnmarshalJSON(b []byte) error { *r = append((*r)[:0], b...); return nil }

func (v *Verifier) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProvider, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProvider, egress.RedactError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s: %s", ErrProvider, url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: GET %s: %v", ErrProvider, url, err)
	}
	if len(body) > maxDocBytes {
		return nil, fmt.Errorf("%w: GET %s: over %d bytes", ErrProvider, url, maxDocBytes)
	}
	return body, nil
}

// clip bounds an untrusted string repeated in an error.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// joseReason keeps go-jose's message (it names the unexpected algorithm) without any input.
func joseReason(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "unexpected signature algorithm") {
		return "its signature algorithm is not allowed"
	}
	return "not a well-formed signed token"
}

// CloseIdleConnections closes the verifier's idle connections to the provider (a server
// shutting down leaves none behind).
func (v *Verifier) CloseIdleConnections() { v.client.CloseIdleConnections() }
