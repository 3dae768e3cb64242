package oidcauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/strictjson"
)

// claims are the parts of a token's payload a decision rests on.
type claims struct {
	Issuer    string
	Subject   string
	Audience  []string
	Expiry    time.Time
	NotBefore time.Time // zero when absent
	Groups    []string
	// Nonce and AuthorizedParty are an ID token's nonce and azp (OpenID Connect Core §2).
	Nonce           string
	AuthorizedParty string
}

// maxSubject bounds a subject: it becomes part of an audit actor.
const maxSubject = 255

// maxGroups bounds the groups a token may carry into the rules.
const maxGroups = 256

// parseClaims decodes a token's payload exactly (strictjson: no duplicate keys, no case
// folding) and checks each claim's type. groupsClaim names the claim the rules' groups are
// read from; it may be absent, a string or a list of strings.
func parseClaims(payload []byte, groupsClaim string) (claims, error) {
	var raw struct {
		Iss string          `json:"iss"`
		Sub string          `json:"sub"`
		Aud json.RawMessage `json:"aud"`
		Exp json.Number     `json:"exp"`
		Nbf json.Number     `json:"nbf"`
		// nonce and azp are read as whatever JSON they hold: a non-string is refused below.
		Nonce json.RawMessage `json:"nonce"`
		Azp   json.RawMessage `json:"azp"`
	}
	if err := strictjson.UnmarshalKnown(payload, &raw); err != nil {
		return claims{}, fmt.Errorf("token claims: %w", err)
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
	aud, err := stringOrList(raw.Aud)
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
	if groupsClaim != "" {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(payload, &all); err != nil {
			return claims{}, fmt.Errorf("token claims: %w", err)
		}
		if g, ok := all[groupsClaim]; ok {
			if c.Groups, err = stringOrList(g); err != nil {
				return claims{}, fmt.Errorf("token claims: %s: %w", groupsClaim, err)
			}
			if len(c.Groups) > maxGroups {
				return claims{}, fmt.Errorf("token claims: %s holds %d groups, at most %d are read", groupsClaim, len(c.Groups), maxGroups)
			}
		}
	}
	return c, nil
}

// stringOrList reads a claim that is a string or a list of strings; absent is empty.
func stringOrList(b json.RawMessage) ([]string, error) {
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

// numericDate reads a JWT NumericDate (seconds since the epoch, RFC 7519 §2).
func numericDate(n json.Number) (time.Time, error) {
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > 1e11 {
		return time.Time{}, errors.New("want seconds since 1970")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// printable reports whether s may name an actor: valid UTF-8 with no character
// [agenttext.Hidden] reports (C0 and C1 controls, bidirectional controls, line separators,
// format and invisible characters: the audit's actor is printed to terminals as it is), and no
// newline or tab either.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == '\n' || r == '\t' || agenttext.Hidden(r) {
			return false
		}
	}
	return true
}
