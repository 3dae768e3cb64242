package oidcauth

import (
	"bytes"
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
	IssuedAt  time.Time // zero when absent
	Groups    []string
	// Nonce and AuthorizedParty are an ID token's nonce and azp (OpenID Connect Core §2).
	Nonce           string
	AuthorizedParty string
}

// maxSubject bounds a subject: it becomes part of an audit actor.
const maxSubject = 255

// maxGroups bounds the groups a token may carry into the rules.
const maxGroups = 256

// claimNames are the claims parseClaims reads by a fixed name. A key equal to one of them only
// under case folding ("Sub") is refused: encoding/json would read it as that claim, a
// case-sensitive reader would not.
var claimNames = strictjson.NewFields("iss", "sub", "aud", "exp", "nbf", "iat", "nonce", "azp")

// parseClaims decodes a token's payload exactly (strictjson: valid UTF-8 and JSON, no duplicate
// keys at any level, not even under case folding, no near-miss of a claim name, no number beyond
// float64) and checks each claim's type. groupsClaim names the claim the rules' groups are read
// from; it may be absent, a string or a list of strings.
//
// It is one strict pass (strictjson's Members) that yields the payload's members as written;
// each claim is then read from its own bytes, as encoding/json would read it into the type it
// had before (a string: null is empty; exp and nbf: a json.Number; aud and the groups: a string
// or a list of strings). The oracle of that equivalence is parseClaimsTwoPass (the test file).
// This halves the cost of a token's first request beyond its signature.
func parseClaims(payload []byte, groupsClaim string) (claims, error) {
	var buf [16]strictjson.Member
	members, err := claimNames.Members(payload, buf[:0])
	if err != nil {
		return claims{}, fmt.Errorf("token claims: %w", err)
	}
	var iss, sub, aud, exp, nbf, iat, nonce, azp, groups []byte
	for _, m := range members {
		switch m.Key {
		case "iss":
			iss = m.Value
		case "sub":
			sub = m.Value
		case "aud":
			aud = m.Value
		case "exp":
			exp = m.Value
		case "nbf":
			nbf = m.Value
		case "iat":
			iat = m.Value
		case "nonce":
			nonce = m.Value
		case "azp":
			azp = m.Value
		}
		if groupsClaim != "" && m.Key == groupsClaim { // it may also be one of the above
			groups = m.Value
		}
	}
	var c claims
	if c.Issuer, err = claimString("iss", iss); err != nil {
		return claims{}, err
	}
	if c.Subject, err = claimString("sub", sub); err != nil {
		return claims{}, err
	}
	if c.Nonce, err = claimString("nonce", nonce); err != nil {
		return claims{}, err
	}
	if c.AuthorizedParty, err = claimString("azp", azp); err != nil {
		return claims{}, err
	}
	if c.Subject == "" || len(c.Subject) > maxSubject || !printable(c.Subject) {
		return claims{}, errors.New("token claims: sub must be 1-255 printable characters (no control, bidirectional, separator or invisible character)")
	}
	if c.Audience, err = stringOrList(aud); err != nil {
		return claims{}, fmt.Errorf("token claims: aud: %w", err)
	}
	expN, err := jsonNumber(exp)
	if err != nil {
		return claims{}, fmt.Errorf("token claims: exp: %w", err)
	}
	if expN == "" {
		return claims{}, errors.New("token claims: exp is required")
	}
	if c.Expiry, err = numericDate(expN); err != nil {
		return claims{}, fmt.Errorf("token claims: exp: %w", err)
	}
	nbfN, err := jsonNumber(nbf)
	if err != nil {
		return claims{}, fmt.Errorf("token claims: nbf: %w", err)
	}
	if nbfN != "" {
		if c.NotBefore, err = numericDate(nbfN); err != nil {
			return claims{}, fmt.Errorf("token claims: nbf: %w", err)
		}
	}
	iatN, err := jsonNumber(iat)
	if err != nil {
		return claims{}, fmt.Errorf("token claims: iat: %w", err)
	}
	if iatN != "" {
		if c.IssuedAt, err = numericDate(iatN); err != nil {
			return claims{}, fmt.Errorf("token claims: iat: %w", err)
		}
	}
	if groups != nil {
		if c.Groups, err = stringOrList(groups); err != nil {
			return claims{}, fmt.Errorf("token claims: %s: %w", groupsClaim, err)
		}
		if len(c.Groups) > maxGroups {
			return claims{}, fmt.Errorf("token claims: %s holds %d groups, at most %d are read", groupsClaim, len(c.Groups), maxGroups)
		}
	}
	return c, nil
}

// claimString reads the string claim name from its value b; absent is "".
func claimString(name string, b []byte) (string, error) {
	if b == nil {
		return "", nil
	}
	s, err := jsonString(b)
	if err != nil {
		return "", fmt.Errorf("token claims: %s must be a string", name)
	}
	return s, nil
}

// jsonString reads a JSON value (valid, as strictjson passed it) into a string as encoding/json
// would: a string, or null for "". A string with no escape is its bytes (the payload is valid
// UTF-8); one with escapes is unquoted by encoding/json itself, so it means what it meant.
func jsonString(b []byte) (string, error) {
	switch b[0] {
	case 'n':
		return "", nil
	case '"':
		if bytes.IndexByte(b, '\\') < 0 {
			return string(b[1 : len(b)-1]), nil
		}
		var s string
		err := json.Unmarshal(b, &s)
		return s, err
	}
	return "", errors.New("not a string")
}

// jsonNumber reads a NumericDate claim (exp, nbf, iat): RFC 7519 makes it a JSON number of
// seconds since 1970, so a number is its text, absent or null is "", and anything else, a
// string holding a number included (which encoding/json's json.Number would take), is
// refused.
func jsonNumber(b []byte) (json.Number, error) {
	if len(b) == 0 || b[0] == 'n' {
		return "", nil
	}
	if c := b[0]; c == '-' || '0' <= c && c <= '9' {
		return json.Number(b), nil
	}
	return "", errors.New("want a JSON number of seconds since 1970 (RFC 7519 NumericDate), not a string or another value")
}

// errNotStrings is stringOrList's refusal.
var errNotStrings = errors.New("want a string or a list of strings")

// stringOrList reads a claim that is a string or a list of strings; absent or null is empty.
// An element of a list may be null, read as "" (as encoding/json reads it into a []string).
func stringOrList(b []byte) ([]string, error) {
	if len(b) == 0 || b[0] == 'n' {
		return nil, nil
	}
	switch b[0] {
	case '"':
		s, err := jsonString(b)
		if err != nil {
			return nil, errNotStrings
		}
		return []string{s}, nil
	case '[':
	default:
		return nil, errNotStrings
	}
	// b is a valid JSON array: what is between its elements is whitespace and commas. The
	// elements gather on the stack and leave in one slice of their number.
	var few [8]string
	list := few[:0]
	for i := 1; ; {
		for b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' || b[i] == ',' {
			i++
		}
		switch b[i] {
		case ']':
			return append(make([]string, 0, len(list)), list...), nil
		case 'n':
			list = append(list, "")
			i += len("null")
		case '"':
			end := stringEnd(b, i)
			s, err := jsonString(b[i:end])
			if err != nil {
				return nil, errNotStrings
			}
			list = append(list, s)
			i = end
		default:
			return nil, errNotStrings
		}
	}
}

// stringEnd returns the index just past the JSON string that starts at b[i] (b is valid JSON).
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++ // the escaped byte cannot end the string
		}
	}
	return i + 1
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
