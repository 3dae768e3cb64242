package host

import (
	"os"
	"strings"
	"testing"
)

// otherBoot is a well-formed boot id no real boot has had.
const otherBoot = "0123456789abcdef0123456789abcdef"

func TestParseBootID(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{in: "1e5d60f7-d31e-428c-880a-01a7164013cb\n", want: "1e5d60f7d31e428c880a01a7164013cb"},
		{in: "1e5d60f7-d31e-428c-880a-01a7164013cb", want: "1e5d60f7d31e428c880a01a7164013cb"},
		{in: "1E5D60F7-D31E-428C-880A-01A7164013CB\n", want: "1e5d60f7d31e428c880a01a7164013cb"},
		{in: ""},
		{in: "\n"},
		{in: "1e5d60f7d31e428c880a01a7164013cb\n"},         // no dashes: not the kernel's form
		{in: "1e5d60f7-d31e-428c-880a-01a7164013c\n"},      // short
		{in: "1e5d60f7-d31e-428c-880a-01a7164013cbb\n"},    // long
		{in: "1e5d60f7-d31e-428c-880a-01a7164013cg\n"},     // not hex
		{in: "1e5d60f7:d31e-428c-880a-01a7164013cb\n"},     // a ':' would split a task id
		{in: "1e5d60f7-d31e-428c-880a-01a7164013cb\n\n"},   // two newlines
		{in: "-1e5d60f7d31e-428c-880a-01a7164013cb\n"},     // dashes misplaced
		{in: " 1e5d60f7-d31e-428c-880a-01a7164013c\n"},     // space
		{in: "1e5d60f7-d31e-428c-880a-01a7164013cb\r\n"},   // CR
		{in: "1e5d60f7-d31e-428c-880a-01a7164013cb\x00\n"}, // NUL
	} {
		got, err := parseBootID(tt.in)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("parseBootID(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if err == nil && !IsBootID(got) {
			t.Errorf("parseBootID(%q) = %q, which IsBootID refuses", tt.in, got)
		}
	}
	for _, s := range []string{"", otherBoot[:31], otherBoot + "0", strings.ToUpper(otherBoot), "0123456789abcdef0123456789abcdeg", "0123456789abcdef-123456789abcdef"} {
		if IsBootID(s) {
			t.Errorf("IsBootID(%q) = true", s)
		}
	}
}

// TestBootID_ThisBoot: BootID is the kernel's boot id in identities' form, the same on
// every call.
func TestBootID_ThisBoot(t *testing.T) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		t.Skipf("SKIP: %s is not readable here: %v", bootIDFile, err)
	}
	want := strings.ReplaceAll(strings.TrimSpace(string(b)), "-", "")
	for range 2 {
		if got, err := BootID(); got != want || err != nil {
			t.Fatalf("BootID() = %q, %v; want %q", got, err, want)
		}
	}
}
