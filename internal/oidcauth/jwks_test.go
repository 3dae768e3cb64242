package oidcauth_test

import (
	"encoding/json"
	"net/http"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

func fetchJWKS(t *testing.T, uri string) jose.JSONWebKeySet {
	t.Helper()
	resp, err := http.Get(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	return set
}
