package oidcauth

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/strictjson"
)

// parseClaimsTwoPass is parseClaims as it was before its one-pass decode:
// strictjson's check, encoding/json into a struct, then encoding/json again into a map for the
// groups claim. It stays as the oracle FuzzParseClaims_MatchesTwoPass holds parseClaims to: both
// refuse the same payloads and read the same claims from the others.
func parseClaimsTwoPass(payload []byte, groupsClaim string) (claims, error) {
	var raw struct {
		Iss string          `json:"iss"`
		Sub string          `json:"sub"`
		Aud json.RawMessage `json:"aud"`
		Exp json.Number     `json:"exp"`
		Nbf json.Number     `json:"nbf"`
		Iat json.Number     `json:"iat"`
		// nonce and azp are read as whatever JSON they hold: a non-string is refused below.
		Nonce json.RawMessage `json:"nonce"`
		Azp   json.RawMessage `json:"azp"`
	}
	if err := strictjson.UnmarshalKnown(payload, &raw); err != nil {
		return claims{}, fmt.Errorf("token claims: %w", err)
	}
	// RFC 7519: a NumericDate is a JSON number; json.Number also takes a string holding one.
	var dates map[string]json.RawMessage
	if err := json.Unmarshal(payload, &dates); err != nil {
		return claims{}, fmt.Errorf("token claims: %w", err)
	}
	for _, name := range []string{"exp", "nbf", "iat"} {
		if v := dates[name]; len(v) > 0 && v[0] != 'n' && v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return claims{}, fmt.Errorf("token claims: %s: not a JSON number", name)
		}
	}
	var c claims
	c.Issuer, c.Subject = raw.Iss, raw.Sub
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		to   *string
	}{{"nonce", raw.Nonce, &c.Nonce}, {"azp", raw.Azp, &c.AuthorizedParty}} {
		if len(f.raw) > 0 && json.Unmarshal(f.raw, f.to) != nil {
			return claims{}, fmt.Errorf("token claims: %s must be a string", f.name)
		}
	}
	if c.Subject == "" || len(c.Subject) > maxSubject || !printable(c.Subject) {
		return claims{}, errors.New("token claims: sub must be 1-255 printable characters (no control, bidirectional, separator or invisible character)")
	}
	aud, err := stringOrListTwoPass(raw.Aud)
	if err != nil {
		return claims{}, fmt.Errorf("token claims: aud: %w", err)
	}
	c.Audience = aud
	if raw.Exp == "" {
		return claims{}, errors.New("token claims: exp is required")
	}
	if c.Expiry, err = numericDate(raw.Exp); err != nil {
		return claims{}, fmt.Errorf("token claims: exp: %w", err)
	}
	if raw.Nbf != "" {
		if c.NotBefore, err = numericDate(raw.Nbf); err != nil {
			return claims{}, fmt.Errorf("token claims: nbf: %w", err)
		}
	}
	if raw.Iat != "" {
		if c.IssuedAt, err = numericDate(raw.Iat); err != nil {
			return claims{}, fmt.Errorf("token claims: iat: %w", err)
		}
	}
	if groupsClaim != "" {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(payload, &all); err != nil {
			return claims{}, fmt.Errorf("token claims: %w", err)
		}
		if g, ok := all[groupsClaim]; ok {
			if c.Groups, err = stringOrListTwoPass(g); err != nil {
				return claims{}, fmt.Errorf("token claims: %s: %w", groupsClaim, err)
			}
			if len(c.Groups) > maxGroups {
				return claims{}, fmt.Errorf("token claims: %s holds %d groups, at most %d are read", groupsClaim, len(c.Groups), maxGroups)
			}
		}
	}
	return c, nil
}

// stringOrListTwoPass reads a claim that is a string or a list of strings; absent is empty.
func stringOrListTwoPass(b json.RawMessage) ([]string, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(b, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, errors.New("want a string or a list of strings")
	}
	return list, nil
}
