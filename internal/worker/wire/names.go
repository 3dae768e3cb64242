package wire

// The worker checks these names at every start; a hand-written check costs nothing where
// compiling the equivalent regular expression cost about 0.3 ms of each cold dispatch.
// names_test.go holds each against the expression it replaces.

// ValidDispatchID reports whether id is a dispatch id the worker accepts in a manifest: 1-128
// letters, digits, '_' or '-', starting with a letter or digit. The host refuses any other
// caller-chosen id.
func ValidDispatchID(id string) bool {
	if len(id) == 0 || len(id) > 128 || !isAlnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidEnvKey reports whether k is an environment variable name a manifest may set: 1-128
// letters, digits or '_', not starting with a digit.
func ValidEnvKey(k string) bool {
	if len(k) == 0 || len(k) > 128 || isDigit(k[0]) {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// isSHA256Hex reports whether s is 64 lowercase hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
