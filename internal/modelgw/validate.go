package modelgw

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/secret/redact"
)

const (
	maxIDLen       = 128
	maxToolNameLen = 128
	maxReasonLen   = 512
	// maxDurationMS bounds a reported tool duration (7 days).
	maxDurationMS  = 7 * 24 * 60 * 60 * 1000
	argsHashPrefix = "sha256:"
)

// checkID accepts a dispatch id: 1 to 128 printable ASCII bytes, no spaces.
func checkID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("want 1 to %d bytes, got %d", maxIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return errors.New("not printable ASCII without spaces")
		}
	}
	return nil
}

// checkRole accepts "name@sha256:<64 lowercase hex>".
func checkRole(role string) error {
	name, hash, ok := strings.Cut(role, "@")
	if !ok || checkID(name) != nil || strings.Contains(name, "@") || !isDigest(hash) {
		return errors.New("want subagent@sha256:<64 lowercase hex digits>")
	}
	return nil
}

// isDigest reports whether s is "sha256:" and 64 lowercase hex digits.
func isDigest(s string) bool {
	hex, ok := strings.CutPrefix(s, argsHashPrefix)
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkKey accepts an API key that can be masked and sent as a header value: at least
// redact.MinLen bytes of visible ASCII. The key is never quoted in the error.
func checkKey(key []byte) error {
	if len(key) < redact.MinLen {
		return fmt.Errorf("shorter than %d bytes (it could not be masked in responses)", redact.MinLen)
	}
	for _, c := range key {
		if c <= ' ' || c >= 0x7f {
			return errors.New("contains a byte that is not visible ASCII")
		}
	}
	return nil
}

// checkToolName accepts a letter then up to 127 letters, digits, '_', '.' or '-'.
func checkToolName(name string) error {
	if name == "" || len(name) > maxToolNameLen {
		return fmt.Errorf("want 1 to %d bytes, got %d", maxToolNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !letter {
			return errors.New("must start with a letter")
		}
		if !letter && !(c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return errors.New("only letters, digits, '_', '.' and '-' are allowed")
		}
	}
	return nil
}

// checkReason accepts at most 512 bytes of valid UTF-8 with no control characters.
func checkReason(s string) error {
	if len(s) > maxReasonLen {
		return fmt.Errorf("%d bytes, over the %d byte limit", len(s), maxReasonLen)
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return errors.New("contains a control character")
		}
	}
	return nil
}

// quoted repeats in a message a value the sandbox (or an upstream it may steer) chose: in
// double quotes when it is at most n bytes of printable ASCII other than '"' and '\\', so that
// the redactor, which runs over the whole message before it is sent or recorded, sees the
// value exactly as it came; otherwise only its length. It never cuts a value: the first part
// of a secret is no form the redactor knows, and would reach the audit log unmasked.
func quoted(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("(%d bytes, not repeated)", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return fmt.Sprintf("(%d bytes, not repeated)", len(s))
		}
	}
	return `"` + s + `"`
}

// clip shortens s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
