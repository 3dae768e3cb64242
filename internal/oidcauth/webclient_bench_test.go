package oidcauth_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/agora-dev/agora/internal/oidcauth"
)

// BenchmarkWebSignIn is the provider's part of a sign-in callback: Exchange (the code
// traded at the real provider's token endpoint over loopback, with the PKCE verifier and the
// secret, then the ID token verified with its nonce: key set cached, never the token cache),
// and VerifyIDToken alone on a real ID token. Each iteration's code is made with the timer
// stopped (the provider's login page is a person's time, not agora's).
func BenchmarkWebSignIn(b *testing.B) {
	p := webProvider(b)
	v := newWebVerifierB(b, p.Issuer)
	ctx := context.Background()
	codeFor := func(r oidcauth.AuthRequest) string {
		u, err := v.AuthCodeURL(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		loc, err := p.SignIn(&http.Client{}, u, "id1")
		if err != nil {
			b.Fatal(err)
		}
		back, _ := url.Parse(loc)
		return back.Query().Get("code")
	}
	b.Run("exchange+verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			r := newAuthRequest()
			c := codeFor(r)
			b.StartTimer()
			if _, err := v.Exchange(ctx, r, c, webSecret); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify ID token", func(b *testing.B) {
		r := newAuthRequest()
		status, body, err := p.Exchange(webClient, webSecret, webRedirect, codeFor(r), r.Verifier)
		tok := idTokenOf(b, status, body, err)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.VerifyIDToken(ctx, tok, r.Nonce); err != nil {
				b.Fatal(err)
			}
		}
	})
}
