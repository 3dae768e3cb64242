package catalog

import (
	"regexp"
	"strings"
	"testing"
)

// nameOracle is the catalog name rule as the regexp it is documented as.
var nameOracle = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`)

// TestValidName_AsTheRegexp: the byte check accepts exactly what the documented regexp does,
// at every length around the bounds and with every byte at each end and in the middle.
func TestValidName_AsTheRegexp(t *testing.T) {
	cases := []string{"", "a", "0", "-", ".", "_", "a-", "-a", "a.b", "a_b", "a-b", "A", "aB", "ab\n",
		"\na", "a\x00b", "é", "aé", "a b", strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("a", 65), "a" + strings.Repeat("-", 62) + "a", "a" + strings.Repeat("-", 63) + "a"}
	for c := 0; c < 256; c++ {
		b := string([]byte{byte(c)})
		cases = append(cases, b, "a"+b, b+"a", "a"+b+"a")
	}
	for _, name := range cases {
		if got, want := validName(name), nameOracle.MatchString(name); got != want {
			t.Errorf("validName(%q) = %v, the regexp says %v", name, got, want)
		}
	}
}

// FuzzValidName: any string, the byte check and the regexp agree.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"noop", "a-b.c_d", "-x", "x-", strings.Repeat("z", 64), "A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := validName(name), nameOracle.MatchString(name); got != want {
			t.Fatalf("validName(%q) = %v, the regexp says %v", name, got, want)
		}
	})
}
