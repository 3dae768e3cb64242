package oidcauth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

const (
	webClient   = "agora-web"
	webSecret   = "agora-web-secret"
	webRedirect = "http://127.0.0.1:9/oidc/callback" // never dialled: SignIn stops before it
)

func webProvider(t testing.TB) *oidctest.Provider {
	return oidctest.Start(t, oidctest.Config{Services: append(services(),
		oidctest.Service{ID: "svc-webaud", Secret: "webaud-secret", Groups: []string{"platform"}, Audience: []string{webClient}}),
		UserGroups:  map[string][]string{oidctest.User1: {"platform"}, oidctest.User2: {"marketing"}},
		WebClientID: webClient, WebSecret: webSecret, RedirectURI: []string{webRedirect}})
}

func newWebVerifierB(b testing.TB, issuer string) *oidcauth.Verifier {
	c := config(issuer)
	c.Web = oidcauth.WebClient{ClientID: webClient, RedirectURL: webRedirect}
	v, err := oidcauth.NewWeb(c, oidcauth.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func newWebVerifier(t *testing.T, issuer, client string, now func() time.Time) *oidcauth.Verifier {
	t.Helper()
	c := config(issuer)
	c.Web = oidcauth.WebClient{ClientID: client, RedirectURL: webRedirect}
	v, err := oidcauth.NewWeb(c, oidcauth.Options{RefetchEvery: time.Millisecond, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newAuthRequest() oidcauth.AuthRequest {
	return oidcauth.AuthRequest{State: "state-" + randHex(), Nonce: "nonce-" + randHex(), Verifier: "verifier-" + randHex() + randHex()}
}

var counter int

func randHex() string {
	counter++
	s := sha256.Sum256([]byte(time.Now().String() + string(rune(counter))))
	return base64.RawURLEncoding.EncodeToString(s[:12])
}

// code signs user in at p through the authorization URL of r and returns the code the
// provider sends back, checking the state came back unchanged.
func code(t *testing.T, p *oidctest.Provider, v *oidcauth.Verifier, r oidcauth.AuthRequest, user string) string {
	t.Helper()
	u, err := v.AuthCodeURL(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := p.SignIn(&http.Client{}, u, user)
	if err != nil {
		t.Fatal(err)
	}
	back, err := url.Parse(loc)
	if err != nil || !strings.HasPrefix(loc, webRedirect+"?") || back.Query().Get("state") != r.State || back.Query().Get("code") == "" {
		t.Fatalf("the provider sent the browser to %q", loc)
	}
	return back.Query().Get("code")
}

// TestWebCodeFlow is the web view's sign-in at the real provider: the authorization URL asks
// for a code with an S256 challenge of the verifier (and never carries the verifier), the
// exchange returns the user's identity and role, and a code is good once.
func TestWebCodeFlow(t *testing.T) {
	p := webProvider(t)
	v := newWebVerifier(t, p.Issuer, webClient, nil)
	r := newAuthRequest()
	u, err := v.AuthCodeURL(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.Parse(u)
	sum := sha256.Sum256([]byte(r.Verifier))
	for k, want := range map[string]string{"response_type": "code", "client_id": webClient, "redirect_uri": webRedirect, "state": r.State,
		"nonce": r.Nonce, "code_challenge_method": "S256", "code_challenge": base64.RawURLEncoding.EncodeToString(sum[:])} {
		if got := q.Query().Get(k); got != want {
			t.Errorf("authorization URL %s = %q, want %q", k, got, want)
		}
	}
	if strings.Contains(u, r.Verifier) {
		t.Fatal("the authorization URL carries the PKCE verifier")
	}
	c := code(t, p, v, r, oidctest.User1)
	id, err := v.Exchange(context.Background(), r, c, webSecret)
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != oidctest.User1 || id.Grant.Web != "operator" || id.Actor() != "oidc:"+p.Issuer+"#id1" {
		t.Fatalf("identity %+v", id)
	}
	if _, err := v.Exchange(context.Background(), r, c, webSecret); !errors.Is(err, oidcauth.ErrInvalid) || !strings.Contains(err.Error(), "refused the code") {
		t.Fatalf("a replayed code: %v", err)
	}
	// A user matching no rule is identified, with nothing granted: the caller refuses it.
	r2 := newAuthRequest()
	id, err = v.Exchange(context.Background(), r2, code(t, p, v, r2, oidctest.User2), webSecret)
	if err != nil || !id.Grant.Empty() || id.Subject != oidctest.User2 {
		t.Fatalf("user2: %+v, %v", id, err)
	}
}

// TestWebCodeFlow_PKCE: a code exchanged with another flow's verifier (a code injected into
// another browser's sign-in) or with none is refused by the provider, so the flow's verifier
// is what binds a code to the browser that asked for it.
func TestWebCodeFlow_PKCE(t *testing.T) {
	p := webProvider(t)
	v := newWebVerifier(t, p.Issuer, webClient, nil)
	victim, attacker := newAuthRequest(), newAuthRequest()
	c := code(t, p, v, victim, oidctest.User1)
	injected := victim
	injected.Verifier = attacker.Verifier
	if _, err := v.Exchange(context.Background(), injected, c, webSecret); !errors.Is(err, oidcauth.ErrInvalid) {
		t.Fatalf("a code exchanged with another flow's verifier: %v", err)
	}
	c = code(t, p, v, victim, oidctest.User1)
	if status, body, err := p.Exchange(webClient, webSecret, webRedirect, c, ""); err != nil || status == http.StatusOK {
		t.Fatalf("the provider exchanged a code with no verifier: %d %s %v", status, body, err)
	}
	if _, err := v.Exchange(context.Background(), victim, "", webSecret); !errors.Is(err, oidcauth.ErrInvalid) {
		t.Fatalf("no code: %v", err)
	}
}

// idToken is a real ID token of user for r, obtained by the test as a client would.
func idToken(t *testing.T, p *oidctest.Provider, v *oidcauth.Verifier, r oidcauth.AuthRequest, user string) string {
	t.Helper()
	status, body, err := p.Exchange(webClient, webSecret, webRedirect, code(t, p, v, r, user), r.Verifier)
	return idTokenOf(t, status, body, err)
}

func idTokenOf(t testing.TB, status int, body []byte, err error) string {
	t.Helper()
	var tr struct {
		IDToken string `json:"id_token"`
	}
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.IDToken == "" {
		t.Fatalf("exchange: %d %s %v", status, body, err)
	}
	return tr.IDToken
}

func mustRefuseID(t *testing.T, v *oidcauth.Verifier, tok, nonce, want string) {
	t.Helper()
	id, err := v.VerifyIDToken(context.Background(), tok, nonce)
	if !errors.Is(err, oidcauth.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want ErrInvalid saying %q, got %+v, %v", want, id, err)
	}
	if strings.Contains(err.Error(), tok) {
		t.Fatal("the error repeats the token")
	}
}

// TestVerifyIDToken_Attacks are the ID tokens an attacker would present at a callback: the
// right one with another flow's nonce, one for another client, one from another provider
// (mix-up), an access token in its place, an expired one, and forgeries (alg none, HS256
// keyed by the provider's public key, a tampered nonce).
func TestVerifyIDToken_Attacks(t *testing.T) {
	p := webProvider(t)
	now := time.Now()
	v := newWebVerifier(t, p.Issuer, webClient, func() time.Time { return now })
	r := newAuthRequest()
	tok := idToken(t, p, v, r, oidctest.User1)
	if id, err := v.VerifyIDToken(context.Background(), tok, r.Nonce); err != nil || id.Grant.Web != "operator" {
		t.Fatalf("the real ID token: %+v, %v", id, err)
	}
	t.Run("another flow's nonce", func(t *testing.T) { mustRefuseID(t, v, tok, newAuthRequest().Nonce, "nonce") })
	t.Run("no nonce expected", func(t *testing.T) { mustRefuseID(t, v, tok, "", "nonce") })
	t.Run("another client's verifier", func(t *testing.T) {
		mustRefuseID(t, newWebVerifier(t, p.Issuer, "another-web", nil), tok, r.Nonce, "audience")
	})
	t.Run("an access token for the web client", func(t *testing.T) {
		mustRefuseID(t, v, p.Token(t, "svc-webaud"), r.Nonce, "nonce")
	})
	t.Run("an access token for another audience", func(t *testing.T) {
		mustRefuseID(t, v, p.Token(t, "svc-platform"), r.Nonce, "audience")
	})
	t.Run("mix-up: another provider's ID token for the same client id", func(t *testing.T) {
		other := webProvider(t)
		ov := newWebVerifier(t, other.Issuer, webClient, nil)
		or := newAuthRequest()
		foreign := idToken(t, other, ov, or, oidctest.User1)
		mustRefuseID(t, v, foreign, or.Nonce, "")
	})
	t.Run("expired", func(t *testing.T) {
		late := newWebVerifier(t, p.Issuer, webClient, func() time.Time { return now.Add(2 * time.Hour) })
		mustRefuseID(t, late, tok, r.Nonce, "expired")
	})
	parts := strings.Split(tok, ".")
	var hdr struct {
		Kid string `json:"kid"`
	}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if err := json.Unmarshal(raw, &hdr); err != nil || hdr.Kid == "" {
		t.Fatalf("header %s: %v", raw, err)
	}
	t.Run("alg none", func(t *testing.T) {
		mustRefuseID(t, v, b64(`{"alg":"none","kid":"`+hdr.Kid+`"}`)+"."+parts[1]+".", r.Nonce, "")
	})
	t.Run("HS256 keyed by the provider's public key", func(t *testing.T) {
		pub := providerKey(t, v, tok)
		der, _ := x509.MarshalPKIXPublicKey(pub)
		for _, secret := range [][]byte{der, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})} {
			in := b64(`{"alg":"HS256","kid":"`+hdr.Kid+`","typ":"JWT"}`) + "." + parts[1]
			mac := hmac.New(sha256.New, secret)
			mac.Write([]byte(in))
			mustRefuseID(t, v, in+"."+base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), r.Nonce, "algorithm is not allowed")
		}
	})
	t.Run("the nonce swapped in the signed payload", func(t *testing.T) {
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		other := newAuthRequest().Nonce
		tampered := strings.Replace(string(payload), r.Nonce, other, 1)
		mustRefuseID(t, v, parts[0]+"."+b64(tampered)+"."+parts[2], other, "signature does not verify")
	})
}

// TestWebConfig: the web client's settings are checked with the rest of auth.oidc.
func TestWebConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		web  oidcauth.WebClient
		want string
	}{
		"redirect without client":    {oidcauth.WebClient{RedirectURL: "https://a.example/oidc/callback"}, "client_id is required"},
		"another callback path":      {oidcauth.WebClient{ClientID: "w", RedirectURL: "https://a.example/callback"}, "must be /oidc/callback"},
		"plain http to another host": {oidcauth.WebClient{ClientID: "w", RedirectURL: "http://a.example/oidc/callback"}, "loopback"},
		"no redirect":                {oidcauth.WebClient{ClientID: "w"}, "redirect_url"},
		"a client id with a newline": {oidcauth.WebClient{ClientID: "w\nx", RedirectURL: "https://a.example/oidc/callback"}, "printable"},
	} {
		c := config("https://id.example")
		c.Web = tc.web
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	c := config("https://id.example")
	c.Web = oidcauth.WebClient{ClientID: "w", RedirectURL: "https://agora.example/oidc/callback"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
