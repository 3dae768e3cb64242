package provision_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/catalog/provision"
)

// TestWriter_CapabilityBinaryPEM: an executable that carries a PEM parser's bare marker (the
// claude CLI does) registers; one that carries a real private key is refused. The binary is
// scanned in both cases, never skipped.
func TestWriter_CapabilityBinaryPEM(t *testing.T) {
	f := newFixture(t)
	marker := "-----BEGIN " + "PRIVATE KEY-----"
	elf := "\x7fELF\x02\x01\x01\x00\x00\x00"
	dir := capDir(t, map[string]string{
		"bin/tool": elf + `if(!s.startsWith("` + marker + `"))throw TypeError("pkcs8")` + "\x00",
	})
	if _, err := f.w.PrepareCapability("pem-parser", dir, nil); err != nil {
		t.Fatalf("a binary with a bare PEM marker was refused: %v", err)
	}

	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	dir = capDir(t, map[string]string{"bin/tool": elf + "embedded:" + string(key) + "\x00"})
	_, err = f.w.PrepareCapability("key-holder", dir, nil)
	var ce *provision.CredentialError
	if !errors.As(err, &ce) || len(ce.Findings) != 1 || ce.Findings[0].Pattern != "private-key" || ce.Findings[0].Where != "bin/tool" {
		t.Fatalf("a binary holding a private key = %v, want refused with one private-key finding in bin/tool", err)
	}
}
