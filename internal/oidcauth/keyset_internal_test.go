package oidcauth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestParseKeySet: what a key set may not slip in. A key id listed twice is refused whole;
// symmetric keys, keys without an id and RSA keys under 2048 bits are never kept.
func TestParseKeySet(t *testing.T) {
	big, _ := rsa.GenerateKey(rand.Reader, 2048)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	set := func(keys ...jose.JSONWebKey) []byte {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	keys, err := parseKeySet(set(
		jose.JSONWebKey{Key: &big.PublicKey, KeyID: "good", Algorithm: "RS256"},
		jose.JSONWebKey{Key: &small.PublicKey, KeyID: "weak", Algorithm: "RS256"},
		jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "hmac", Algorithm: "HS256"},
		jose.JSONWebKey{Key: &big.PublicKey, Algorithm: "RS256"},
		jose.JSONWebKey{Key: big, KeyID: "private", Algorithm: "RS256"},
	))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys["good"].KeyID != "good" {
		t.Fatalf("kept %v, want only good", keys)
	}
	_, err = parseKeySet(set(jose.JSONWebKey{Key: &big.PublicKey, KeyID: "k"}, jose.JSONWebKey{Key: &big.PublicKey, KeyID: "k"}))
	if !errors.Is(err, ErrProvider) {
		t.Fatalf("a key id twice: %v", err)
	}
	if _, err := parseKeySet([]byte(`{"keys":[],"keys":[]}`)); err == nil {
		t.Fatal("duplicate member accepted")
	}
}
