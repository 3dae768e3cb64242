package wire

import (
	"regexp"
	"strings"
	"testing"
)

// The hand-written checks accept exactly what the expressions they replace accept.
var (
	dispatchIDRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_-]{0,127}$`)
	envKeyRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	sha256HexRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func checkNames(t *testing.T, s string) {
	t.Helper()
	if got, want := ValidDispatchID(s), dispatchIDRE.MatchString(s); got != want {
		t.Errorf("ValidDispatchID(%q) = %v, the expression says %v", s, got, want)
	}
	if got, want := ValidEnvKey(s), envKeyRE.MatchString(s); got != want {
		t.Errorf("ValidEnvKey(%q) = %v, the expression says %v", s, got, want)
	}
	if got, want := isSHA256Hex(s), sha256HexRE.MatchString(s); got != want {
		t.Errorf("isSHA256Hex(%q) = %v, the expression says %v", s, got, want)
	}
}

func TestNames_AsTheExpressions(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{
		"", "a", "A", "0", "_", "-", "_a", "-a", "a-b", "a_b", "a.b", "a b", "a\n", "\na", "é", "01M8M6WZ04GZFSDB87Y23ASFTV",
		strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 129), "0" + strings.Repeat("_", 127), "0" + strings.Repeat("_", 128),
		hex, hex[:63], hex + "0", strings.ToUpper(hex), hex[:63] + "g", hex[:63] + "\n", "PATH", "9PATH", "PA-TH", "a\x00",
	} {
		checkNames(t, s)
	}
}

func FuzzNames_AsTheExpressions(f *testing.F) {
	f.Add("a-b_c")
	f.Add(strings.Repeat("0123456789abcdef", 4))
	f.Fuzz(func(t *testing.T, s string) { checkNames(t, s) })
}
