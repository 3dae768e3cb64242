package secret

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// elfLike is data Scan treats as binary: an ELF header's bytes, NULs included, around body.
func elfLike(body string) []byte {
	return []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00" + body + "\x00\x00\x03\x00")
}

func realPEMKey(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// TestScan_Binary: a binary is scanned with every pattern, but a PEM marker in it counts only
// when key material follows (a PEM parser's code holds the bare marker; the claude CLI does).
func TestScan_BinaryPEM(t *testing.T) {
	marker := cat("-----BEGIN ", "PRIVATE KEY", "-----")
	key := realPEMKey(t)
	encrypted := cat("-----BEGIN ", "RSA PRIVATE KEY", "-----") + "\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n" +
		strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", 3) + "\n"
	tests := []struct {
		name string
		data []byte
		want []string
	}{
		{"bare marker in code", elfLike(`if(!s.startsWith("` + marker + `"))throw TypeError("pkcs8")`), nil},
		{"two markers in a message", elfLike(`"` + marker + `" (PKCS#8) or "` + fxRSA + `" (PKCS#1)`), nil},
		{"marker then too little", elfLike(marker + "\nMIIE\n"), nil},
		{"real key", elfLike("cfg" + key + "tail"), []string{"private-key"}},
		{"real key with CRLF", elfLike(strings.ReplaceAll(key, "\n", "\r\n")), []string{"private-key"}},
		{"key in a string literal", elfLike(`k="` + strings.ReplaceAll(key, "\n", `\n`) + `"`), []string{"private-key"}},
		{"encrypted key with headers", elfLike(encrypted), []string{"private-key"}},
		{"other patterns still fire", elfLike("x " + fxAWS + " y"), []string{"aws-access-key"}},
		// Text keeps the strict rule: a bare marker in a text file is refused.
		{"bare marker in text", []byte(marker + "\n"), []string{"private-key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range Scan(tt.data, nil) {
				got = append(got, f.Pattern)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("Scan = %v, want %v", got, tt.want)
			}
			if got := Scan(tt.data, []string{"private-key", "aws-access-key"}); len(got) != 0 {
				t.Errorf("allowed patterns still reported: %v", got)
			}
		})
	}
}

// TestScan_RealClaudeBinary scans the real Claude Code CLI (scripts/agent-clis.sh): its PEM
// markers are code, not keys, so nothing is found.
func TestScan_RealClaudeBinary(t *testing.T) {
	p := os.Getenv("AGORA_TEST_CLAUDE")
	if p == "" {
		p = filepath.Join("..", "..", ".cache", "npm", "node_modules", ".bin", "claude")
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Skipf("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE): %v", err)
	}
	b, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	if !IsBinary(b) || !strings.Contains(string(b), cat("-----BEGIN ", "PRIVATE KEY", "-----")) {
		t.Skip("SKIP: this claude build holds no bare PEM marker; nothing to check")
	}
	if f := Scan(b, nil); len(f) != 0 {
		t.Errorf("Scan(claude) = %v, want no finding", f)
	}
}
