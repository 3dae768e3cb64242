package standbyclaim

import (
	"strings"
	"testing"
)

// FuzzParseClaim: a claim line comes from the standby's holder: any line is refused or read,
// never a panic, and the id read is the whole rest of the line and no option, dot file or path.
func FuzzParseClaim(f *testing.F) {
	for _, s := range []string{"claim 01J0000000000000000000000", "claim ", "claim ../x", "ready x", "claim a.b-c_d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		id, err := Parse(line)
		if err != nil {
			return
		}
		if line != "claim "+id || id == "" || strings.ContainsAny(id, "/ \n\x00") || strings.HasPrefix(id, ".") || strings.HasPrefix(id, "-") {
			t.Fatalf("Parse(%q) = %q", line, id)
		}
	})
}

func TestParse(t *testing.T) {
	for _, tt := range []struct{ line, id string }{
		{"claim 01J0000000000000000000000", "01J0000000000000000000000"},
		{"claim a.b-c_d", "a.b-c_d"},
		{"claim ../../etc", ""},
		{"claim --help", ""},
		{"claim .x", ""},
		{"CLAIM X", ""},
		{"claim ", ""},
		{"claim a b", ""},
		{"claim " + strings.Repeat("a", 129), ""},
	} {
		id, err := Parse(tt.line)
		if id != tt.id || (err == nil) != (tt.id != "") {
			t.Errorf("Parse(%q) = %q, %v; want %q", tt.line, id, err, tt.id)
		}
	}
}
