package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// canary has bytes that make every form differ: '+' and '/' in standard base64 (from 0xfb 0xff),
// characters that URL and JSON escaping rewrite, and HTML characters json escapes by default.
var canary = []byte("c4n4ry-S3CR3T <&>\"/?=\xfb\xff\x00tail")

// encodedForms lists the forms the package doc promises, built with the standard encoders.
func encodedForms(v []byte) map[string]string {
	jsonHTML, _ := json.Marshal(string(v))
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	enc.Encode(string(v))
	return map[string]string{
		"raw":                 string(v),
		"base64 std":          base64.StdEncoding.EncodeToString(v),
		"base64 std raw":      base64.RawStdEncoding.EncodeToString(v),
		"base64 url":          base64.URLEncoding.EncodeToString(v),
		"base64 url raw":      base64.RawURLEncoding.EncodeToString(v),
		"hex lower":           hex.EncodeToString(v),
		"hex upper":           strings.ToUpper(hex.EncodeToString(v)),
		"url query":           url.QueryEscape(string(v)),
		"url path":            url.PathEscape(string(v)),
		"json":                strings.Trim(string(jsonHTML), `"`),
		"json no html escape": strings.Trim(strings.TrimSpace(noHTML.String()), `"`),
	}
}

func TestForms_AllDistinct(t *testing.T) {
	seen := map[string]string{}
	for name, f := range encodedForms(canary) {
		if other, ok := seen[f]; ok {
			t.Errorf("canary forms %q and %q coincide; the canary does not exercise both", name, other)
		}
		seen[f] = name
	}
}

func TestRedactor_EachForm(t *testing.T) {
	r := New([][]byte{canary})
	for name, f := range encodedForms(canary) {
		t.Run(name, func(t *testing.T) {
			in := "before " + f + " after"
			want := "before " + Mask + " after"
			if got := r.String(in); got != want {
				t.Errorf("String: got %q, want %q", got, want)
			}
			if got := streamed(t, r, []byte(in), 3); got != want {
				t.Errorf("Writer: got %q, want %q", got, want)
			}
		})
	}
}

// TestRedactor_Base64Blob embeds the canary at every offset inside longer base64 blobs and checks
// that every base64 character whose six bits all come from the canary is masked.
func TestRedactor_Base64Blob(t *testing.T) {
	r := New([][]byte{canary})
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
		for pre := range 7 {
			for post := range 4 {
				t.Run(fmt.Sprintf("%p/pre%d/post%d", enc, pre, post), func(t *testing.T) {
					data := append(append(bytes.Repeat([]byte{0xA7}, pre), canary...), bytes.Repeat([]byte{0x3C}, post)...)
					blob := enc.EncodeToString(data)
					out := r.String("x=" + blob + ";")
					i := strings.Index(out, Mask)
					if i < 0 {
						t.Fatalf("no mask in %q", out)
					}
					if strings.Count(out, Mask) != 1 {
						t.Fatalf("want one mask in %q", out)
					}
					kept := len(out) - len(Mask) - 3 // blob characters left unmasked
					a := i - 2                       // blob characters kept before the mask
					b := a + (len(blob) - kept)      // first blob character kept after the mask
					for j := range len(blob) {
						lo, hi := 6*j, 6*j+6
						inside := lo >= 8*pre && hi <= 8*(pre+len(canary))
						if inside && (j < a || j >= b) {
							t.Errorf("blob character %d (bits %d-%d, all from the canary) left unmasked: %q", j, lo, hi, out)
						}
					}
				})
			}
		}
	}
}

func TestRedactor_NeverContainsCanary(t *testing.T) {
	r := New([][]byte{canary})
	var in bytes.Buffer
	for name, f := range encodedForms(canary) {
		fmt.Fprintf(&in, "%s: %s|%s%s\n", name, f, f, f)
	}
	for pre := range 3 {
		data := append(bytes.Repeat([]byte("z"), pre), canary...)
		fmt.Fprintf(&in, "blob %s %s\n", base64.StdEncoding.EncodeToString(data), base64.RawURLEncoding.EncodeToString(data))
	}
	out := r.Bytes(in.Bytes())
	for name, f := range encodedForms(canary) {
		if bytes.Contains(out, []byte(f)) {
			t.Errorf("output contains the %s form %q:\n%s", name, f, out)
		}
	}
	if bytes.Equal(out, in.Bytes()) {
		t.Fatal("nothing was redacted")
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "blob ") && strings.Count(line, Mask) != 2 {
			t.Errorf("blob line %q: want both blobs masked", line)
		}
	}
}

func TestRedactor_Overlap(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{"nested: longer wins", []string{"abcdefgh", "abcdefghijkl"}, "x abcdefghijkl y", "x " + Mask + " y"},
		{"nested inside", []string{"cdefghij", "abcdefghijkl"}, "x abcdefghijkl y", "x " + Mask + " y"},
		{"partial overlap merges", []string{"alpha-secret-1", "secret-1-beta"}, "<alpha-secret-1-beta>", "<" + Mask + ">"},
		{"chain of overlaps", []string{"aaaabbbb", "bbbbcccc", "ccccdddd"}, "aaaabbbbccccdddd!", Mask + "!"},
		{"adjacent stay separate", []string{"abcdefgh"}, "abcdefghabcdefgh", Mask + Mask},
		{"self overlap", []string{"aaaaaaaa"}, "aaaaaaaaaaa", Mask},
		{"same value twice", []string{"abcdefgh", "abcdefgh"}, "abcdefgh", Mask},
		{"left to right", []string{"11111111", "22222222"}, "22222222 11111111 22222222", Mask + " " + Mask + " " + Mask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var vals [][]byte
			for _, v := range tt.values {
				vals = append(vals, []byte(v))
			}
			r := New(vals)
			if got := r.String(tt.in); got != tt.want {
				t.Errorf("String(%q): got %q, want %q", tt.in, got, tt.want)
			}
			if got := streamed(t, r, []byte(tt.in), 1); got != tt.want {
				t.Errorf("Writer byte by byte (%q): got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNew_ShortValuesIgnored(t *testing.T) {
	short := [][]byte{nil, {}, []byte("1"), []byte("yes"), []byte("seven77")}
	r := New(short)
	if !r.Empty() {
		t.Error("Empty: got false for values all shorter than MinLen")
	}
	in := "1 yes seven77 " + base64.StdEncoding.EncodeToString([]byte("seven77"))
	if got := r.String(in); got != in {
		t.Errorf("String: got %q, want input unchanged", got)
	}
	if !New(nil).Empty() {
		t.Error("New(nil).Empty(): got false")
	}
	r = New(append(short, []byte("eight888")))
	if r.Empty() {
		t.Error("Empty: got true with an 8-byte value")
	}
	if got, want := r.String("1 eight888 yes"), "1 "+Mask+" yes"; got != want {
		t.Errorf("String: got %q, want %q", got, want)
	}
}

func TestRedactor_BytesCopies(t *testing.T) {
	for _, r := range []*Redactor{New(nil), New([][]byte{canary})} {
		in := []byte("nothing secret here")
		out := r.Bytes(in)
		out[0] = 'X'
		if in[0] != 'n' {
			t.Error("Bytes returned its input, not a copy")
		}
	}
}

func TestNew_CopiesValues(t *testing.T) {
	v := []byte("mutable-secret")
	r := New([][]byte{v})
	copy(v, "XXXXXXXXXXXXXX")
	if got, want := r.String("mutable-secret"), Mask; got != want {
		t.Errorf("after mutating the caller's slice: got %q, want %q", got, want)
	}
}

func TestRedactor_FormatHidesValues(t *testing.T) {
	r := New([][]byte{canary})
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q", "%d"} {
		got := fmt.Sprintf(verb, r)
		if got != "redact.Redactor{redacted}" {
			t.Errorf("Sprintf(%s): got %q, want the placeholder", verb, got)
		}
	}
	if got := fmt.Sprintf("%v %+v", *r, []*Redactor{r}); got != "redact.Redactor{redacted} [redact.Redactor{redacted}]" {
		t.Errorf("formatting a Redactor value or slice: got %q, want placeholders", got)
	}
}

func TestMaxLenCoversForms(t *testing.T) {
	r := New([][]byte{canary})
	longest := 0
	for _, f := range encodedForms(canary) {
		longest = max(longest, len(f))
	}
	if diff := cmp.Diff(longest, r.maxLen); diff != "" {
		t.Errorf("maxLen (-want +got):\n%s", diff)
	}
}
