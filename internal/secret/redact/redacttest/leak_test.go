package redacttest

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// The oracle itself must read every encoding the tests use, or a test judged by it proves
// nothing.
func TestLeak_ReadsEveryEncoding(t *testing.T) {
	secret := []byte("ghp_R3aLs3cr3tVALUE0123456789abcdefghijKLMNOPqrstuvwxyz0123456789")[:64]
	b64 := base64.StdEncoding.EncodeToString
	var uesc, every strings.Builder
	for _, c := range secret {
		fmt.Fprintf(&uesc, `\u%04x`, c)
		fmt.Fprintf(&every, "%%%02X", c)
	}
	var spaced []string
	for _, c := range secret {
		spaced = append(spaced, hex.EncodeToString([]byte{c}))
	}
	header := "Basic " + b64([]byte("x-access-token:"+string(secret)))
	for name, out := range map[string]string{
		"raw":               "x " + string(secret) + " y",
		"base64 76":         Wrap(b64([]byte("Bearer "+string(secret))), 76, "\n"),
		"base64 64 crlf":    Wrap(b64([]byte("Authorization: Bearer "+string(secret))), 64, "\r\n"),
		"base64url":         base64.URLEncoding.EncodeToString([]byte("ab" + string(secret))),
		"hex spaced":        strings.Join(spaced, " "),
		"hex dump":          hex.Dump([]byte("Bearer " + string(secret))),
		"json \\u":          `{"a":"` + uesc.String() + `"}`,
		"percent every":     every.String(),
		"nested basic":      Wrap(b64([]byte(header)), 76, "\n"),
		"cut":               string(secret[:9]),
		"upper":             strings.ToUpper(string(secret)),
		"hex of base64":     hex.EncodeToString([]byte(b64(secret))),
		"base64 at offset2": b64(append([]byte("xy"), secret...)),
	} {
		if p, _ := Leak([]byte(out), secret, 8); len(p) < 8 {
			t.Errorf("%s: read back %q, want at least 8 bytes of the secret", name, p)
		}
	}
	if p, how := Leak([]byte("nothing to see here, "+b64([]byte("nor here"))), secret, 8); p != nil {
		t.Errorf("read %q (%s) from unrelated text", p, how)
	}
}
