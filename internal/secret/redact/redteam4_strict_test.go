package redact

import (
	"strings"
	"testing"
)

// TestRedTeam4_StrictMasksValuesThatLookLikeEscapes: a bound
// value that itself holds what the skeleton decodes (%41, &#65;, &#x41;, \x41, a blank, %2F
// near its end) is masked as a host reflects it: verbatim, in a header, quoted, and for a
// value with blanks form-encoded (+ or %20).
func TestRedTeam4_StrictMasksValuesThatLookLikeEscapes(t *testing.T) {
	for _, v := range []string{"Sup3rS3cret%41Pass-XYZ", "Sup3rS3cretPass-XYZ%41", "Sup3r&#65;S3cretPass",
		`Sup3rS3cretPass\x41B`, "abcdefghijklmnop&#x41;", "Zq9_Lm2-Xw7.Yt5/Kp3%2Fend", "correct horse battery staple"} {
		r := NewStrict([][]byte{[]byte(v)})
		texts := []string{v, "x=" + v + ";", `"` + v + `"`, "Authorization: Bearer " + v + "\r\n"}
		if strings.Contains(v, " ") {
			texts = append(texts, "q="+strings.ReplaceAll(v, " ", "+"), "q="+strings.ReplaceAll(v, " ", "%20"))
		}
		for _, text := range texts {
			if out := r.String(text); !strings.Contains(out, Mask) {
				t.Errorf("value %q reflected as %q passed: %q", v, text, out)
			}
		}
	}
}
