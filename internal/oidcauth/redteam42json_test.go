package oidcauth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// TestRedTeam42JSON_TokenWithLineBreakRefused: a bearer token is the compact form exactly
// (ParseSignedCompact). base64's decoder drops '\r' and '\n' wherever they are,
// and go-jose re-encodes the header it decoded to check the signature, so a valid token with a
// line break inside any segment would verify as the very same token under another string (and
// another cache entry): the line break is refused like a space.
func TestRedTeam42JSON_TokenWithLineBreakRefused(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: services()})
	v := newVerifier(t, p.Issuer, time.Millisecond)
	real := p.Token(t, "svc-platform")
	if _, err := v.Verify(context.Background(), real); err != nil {
		t.Fatal(err)
	}
	first, last := strings.IndexByte(real, '.'), strings.LastIndexByte(real, '.')
	for _, br := range []string{"\n", "\r", "\r\n"} {
		for _, at := range []int{5, first + 5, last + 5, len(real)} {
			mustInvalid(t, v, real[:at]+br+real[at:], "not a compact JWS")
		}
	}
}
