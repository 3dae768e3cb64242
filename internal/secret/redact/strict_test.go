package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/secret/redact/redacttest"
)

// long64 is a 64-byte token, as a host may echo one.
const long64 = "ghp_R3aLs3cr3tVALUEs64charsLONGabcdefghijKLMNOPqrstuvw0123456789"

// A strict Redactor masks everything New does, with the text around it kept.
func TestStrict_MasksEveryFormNewMasks(t *testing.T) {
	r := NewStrict([][]byte{canary})
	forms := encodedForms(canary)
	forms["cquote"] = cQuote(canary)
	for name, f := range forms {
		in := "before " + f + " after"
		for _, got := range []string{r.String(in), streamed(t, r, []byte(in), 3)} {
			if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") || !strings.Contains(got, Mask) || strings.Contains(got, f) {
				t.Errorf("%s: %q -> %q", name, in, got)
			}
		}
	}
}

// The encodings a host may echo a value in, in full and cut: masked, so that no piece of PieceLen
// bytes can be read back (judged by redacttest, which shares no code with the redactor).
func TestStrict_WrappedEscapedAndCut(t *testing.T) {
	v := []byte(long64)
	r := NewStrict([][]byte{v})
	b64 := base64.StdEncoding.EncodeToString
	var uesc, every, ents, octal []string
	for _, c := range v {
		uesc = append(uesc, fmt.Sprintf(`\u%04X`, c))
		every = append(every, fmt.Sprintf("%%%02x", c))
		ents = append(ents, fmt.Sprintf("&#%d;", c))
		octal = append(octal, fmt.Sprintf(`\%03o`, c))
	}
	var spaced []string
	for _, c := range v {
		spaced = append(spaced, hex.EncodeToString([]byte{c}))
	}
	basic := "Basic " + b64([]byte("x-access-token:"+long64))
	cases := map[string]string{
		"base64 76 LF":    redacttest.Wrap(b64([]byte("Bearer "+long64)), 76, "\n"),
		"base64 64 LF":    redacttest.Wrap(b64([]byte("Bearer "+long64)), 64, "\n"),
		"base64 76 CRLF":  redacttest.Wrap(b64([]byte("Bearer "+long64)), 76, "\r\n"),
		"base64 indented": redacttest.Wrap(b64([]byte("k: "+long64)), 20, "\n        "),
		"base64url":       base64.URLEncoding.EncodeToString([]byte("x" + long64)),
		"hex spaced":      strings.Join(spaced, " "),
		"hex dump":        hex.Dump(v),
		"raw spaced":      redacttest.Wrap(long64, 5, " "),
		"json \\u":        `"` + strings.Join(uesc, "") + `"`,
		"json mixed":      `"` + long64[:20] + strings.Join(uesc[20:40], "") + long64[40:] + `"`,
		"percent every":   strings.Join(every, ""),
		"html entities":   strings.Join(ents, ""),
		"octal":           strings.Join(octal, ""),
		"cut 40":          ("Bearer " + long64)[:40],
		"cut 40 base64":   redacttest.Wrap(b64([]byte(("Bearer " + long64)[:40])), 76, "\n"),
		"suffix":          long64[40:],
		"middle":          long64[20:32],
		"lower":           strings.ToLower(long64),
		"basic reflected": basic,
		"basic base64 76": redacttest.Wrap(b64([]byte(basic)), 76, "\n"),
		"basic hex":       hex.EncodeToString([]byte(basic)),
		"basic percent every": strings.Join(func() []string {
			var o []string
			for _, c := range []byte(basic) {
				o = append(o, fmt.Sprintf("%%%02X", c))
			}
			return o
		}(), ""),
		"base64 of base64 76":   redacttest.Wrap(b64([]byte(b64(v))), 76, "\n"),
		"base64url of base64":   base64.RawURLEncoding.EncodeToString([]byte("ab" + b64(v))),
		"header name lowercase": "x-" + strings.ToLower(long64[10:30]) + ": 1",
	}
	min := PieceLen(len(v))
	for name, in := range cases {
		for _, chunk := range []int{0, 1, 7, 76} {
			out := streamed(t, r, []byte("<<"+in+">>"), chunk)
			if piece, how := redacttest.Leak([]byte(out), v, min); piece != nil {
				t.Errorf("%s (chunks of %d): %d bytes read back (%s): %q\nout: %q", name, chunk, len(piece), how, piece, out)
			}
			if !strings.HasPrefix(out, "<<") || !strings.HasSuffix(out, ">>") || !strings.Contains(out, Mask) {
				t.Errorf("%s (chunks of %d): %q", name, chunk, out)
			}
		}
	}
}

// PieceLen is the line: a piece that long is masked in every form, one byte shorter passes.
func TestStrict_PieceLenIsTheLine(t *testing.T) {
	for _, n := range []int{8, 10, 13, 16, 64} {
		v := []byte(long64[:n])
		r := NewStrict([][]byte{v})
		p := PieceLen(n)
		for _, at := range []int{0, n - p} {
			piece := v[at : at+p]
			short := v[at : at+p-1]
			encode := map[string]func([]byte) string{
				"raw": func(b []byte) string { return string(b) },
				"hex": hex.EncodeToString,
			}
			for name, enc := range encode {
				if got := r.String("(" + enc(piece) + ")"); got != "("+Mask+")" {
					t.Errorf("n=%d at %d %s: a piece of %d bytes: %q, want it masked", n, at, name, p, got)
				}
				if in := "(" + enc(short) + ")"; r.String(in) != in {
					t.Errorf("n=%d at %d %s: a piece of %d bytes: %q, want it kept", n, at, name, p-1, r.String(in))
				}
			}
		}
	}
}

// A white space run of up to 16 bytes is skipped inside a match; a longer one ends it, and
// pieces shorter than PieceLen on either side pass (a documented limit).
func TestStrict_LongWhiteSpaceEndsAMatch(t *testing.T) {
	v := []byte("k7M2xq9ZfW4pL8nB3vHy") // 20 bytes: PieceLen 8
	r := NewStrict([][]byte{v})
	parts := []string{string(v[:7]), string(v[7:13]), string(v[13:])}
	near := strings.Join(parts, strings.Repeat(" ", maxGap))
	if got := r.String(near); got != Mask {
		t.Errorf("pieces %d spaces apart: %q, want one mask", maxGap, got)
	}
	far := strings.Join(parts, strings.Repeat(" ", maxGap+1))
	if got := r.String(far); got != far {
		t.Errorf("pieces %d spaces apart: %q, want them kept (each shorter than PieceLen)", maxGap+1, got)
	}
}

// An escape split across writes is decoded all the same; the writer holds it back.
func TestStrict_EscapeSplitAcrossWrites(t *testing.T) {
	v := []byte(long64)
	r := NewStrict([][]byte{v})
	var b strings.Builder
	for _, c := range v[:12] {
		fmt.Fprintf(&b, `\u%04x`, c)
	}
	in := []byte("x " + b.String() + " y")
	want := "x " + Mask + " y"
	for cut := range in {
		var out bytes.Buffer
		w := r.Writer(&out)
		w.Write(in[:cut])
		w.Write(in[cut:])
		w.Close()
		if out.String() != want {
			t.Fatalf("split at %d: %q, want %q", cut, out.String(), want)
		}
	}
}

// Streaming gives what Bytes gives, wherever the input is cut, and holds back a bounded
// amount.
func TestStrict_WriterMatchesBytes(t *testing.T) {
	second := []byte("0123456789abcdef-second")
	r := NewStrict([][]byte{[]byte(long64), second})
	in := []byte("head " + redacttest.Wrap(base64.StdEncoding.EncodeToString([]byte(long64)), 10, "\r\n") + " mid %30%31%32%33%34%35%36%37 " +
		string(second[:9]) + strings.Repeat(" ", 40) + long64[50:] + " &#103;&#104;&#112;&#95;R3aLs3 end")
	want := r.Bytes(in)
	if !bytes.Contains(want, []byte(Mask)) {
		t.Fatal("nothing masked")
	}
	for cut := range in {
		var out bytes.Buffer
		w := r.Writer(&out).(*strictWriter)
		w.Write(in[:cut])
		if held, bound := len(w.in), (r.strict.maxLen-1)*(needEscape+maxGap)+needEscape+maxGap; held > bound {
			t.Fatalf("cut %d: holding %d bytes, bound %d", cut, held, bound)
		}
		w.Write(in[cut:])
		w.Close()
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("cut %d:\n got %q\nwant %q", cut, out.Bytes(), want)
		}
	}
}

func TestStrict_ShortAndNoValues(t *testing.T) {
	for _, vals := range [][][]byte{nil, {[]byte("short")}} {
		r := NewStrict(vals)
		if !r.Empty() {
			t.Errorf("NewStrict(%d values) is not empty", len(vals))
		}
		if got := r.String("some text %41"); got != "some text %41" {
			t.Errorf("empty strict redactor changed %q", got)
		}
		if got := streamed(t, r, []byte("some text  \n %41 \\u0041"), 2); got != "some text  \n %41 \\u0041" {
			t.Errorf("empty strict writer changed the text: %q", got)
		}
	}
}

func TestDecodeUnit(t *testing.T) {
	tests := []struct {
		in         string
		final      bool
		dec        string
		span       int
		incomplete bool
	}{
		{"%41x", false, "A", 3, false},
		{"%4", false, "", 0, true},
		{"%4", true, "%", 1, false},
		{"%zz", false, "%", 1, false},
		{`\u0041`, false, "A", 6, false},
		{`\u00e9`, false, "é", 6, false},
		{`\ud83d\ude00`, false, "😀", 12, false},
		{`\ud83d\u0041`, false, `\`, 1, false},
		{`\ud83d`, false, "", 0, true},
		{`\ud83d`, true, `\`, 1, false},
		{`\ude00xxxxxx`, false, `\`, 1, false},
		{`\x41`, false, "A", 4, false},
		{`\101`, false, "A", 4, false},
		{`\181`, false, `\`, 1, false},
		{`\n`, false, " ", 2, false},
		{`\"`, false, `"`, 2, false},
		{`\/`, false, "/", 2, false},
		{`\q`, false, `\`, 1, false},
		{`\`, false, "", 0, true},
		{`\`, true, `\`, 1, false},
		{"&#65;", false, "A", 5, false},
		{"&#x41;", false, "A", 6, false},
		{"&#X41;", false, "A", 6, false},
		{"&#;", false, "&", 1, false},
		{"&amp;", false, "&", 1, false},
		{"&#65", false, "", 0, true},
		{"&#65", true, "&", 1, false},
		{"&#xD800;", false, "&", 1, false},
		{"&#99999999;", false, "&", 1, false},
		{"&#x110000;", false, "&", 1, false},
	}
	for _, tt := range tests {
		var dec [4]byte
		n, span := decodeUnit([]byte(tt.in), tt.final, &dec)
		if tt.incomplete {
			if span != 0 {
				t.Errorf("decodeUnit(%q, %v) = %q, %d; want incomplete", tt.in, tt.final, dec[:n], span)
			}
			continue
		}
		if string(dec[:n]) != tt.dec || span != tt.span {
			t.Errorf("decodeUnit(%q, %v) = %q, %d; want %q, %d", tt.in, tt.final, dec[:n], span, tt.dec, tt.span)
		}
	}
}

// A value written right after an escape starter ("%", "\u", "\x", "&#x" that the sandbox put
// in the header a host reflects) is masked whole, although the skeleton decodes its first
// characters with the escape.
func TestStrict_ValueAfterAnEscapeStarter(t *testing.T) {
	for _, v := range []string{"cafe1234", "cafe12345678", "ab12cd34ef56ab78cd90ef12ab34cd56"} {
		r := NewStrict([][]byte{[]byte(v)})
		for _, pre := range []string{"%", `\u`, `\x`, `\`, "&#x", "&#", `\ud83d\u`} {
			in := "Bearer " + pre + v + ";"
			for _, chunk := range []int{0, 1, 5} {
				out := streamed(t, r, []byte(in), chunk)
				if piece, how := redacttest.Leak([]byte(out), []byte(v), PieceLen(len(v))); piece != nil {
					t.Errorf("%q after %q (chunks of %d): %q read back (%s) from %q", v, pre, chunk, piece, how, out)
				}
			}
		}
	}
}

// A long value (a bound key of up to 64 KiB, the largest secret) is indexed with a stride, so
// its index stays small and the writer holds back at most maxMatch skeleton bytes; it is still
// masked whole, wrapped and in base64, and no piece of PieceLen bytes passes.
func TestStrict_LongValue(t *testing.T) {
	for _, n := range []int{1500, 8 << 10, 64 << 10} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		v := make([]byte, n)
		for i := range v {
			v[i] = secretAlphabet[rng.IntN(len(secretAlphabet))]
		}
		r := NewStrict([][]byte{v})
		if keys := len(r.strict.byKey); keys > 120_000 {
			t.Errorf("n=%d: %d keys indexed, want a bounded index", n, keys)
		}
		if r.strict.maxLen > maxMatch {
			t.Errorf("n=%d: follows matches of %d bytes, cap %d", n, r.strict.maxLen, maxMatch)
		}
		p := PieceLen(n)
		for name, in := range map[string]string{
			"raw":       "<" + string(v) + ">",
			"base64 76": "<" + redacttest.Wrap(base64.StdEncoding.EncodeToString(v), 76, "\n") + ">",
			"piece":     "<" + string(v[n/3:n/3+p]) + ">",
			"hex piece": "<" + hex.EncodeToString(v[n/2:n/2+p]) + ">",
		} {
			out := streamed(t, r, []byte(in), 32<<10)
			if piece, how := redacttest.Leak([]byte(out), v, p); piece != nil {
				t.Errorf("n=%d %s: %d bytes read back (%s), PieceLen %d", n, name, len(piece), how, p)
			}
			if !strings.Contains(out, Mask) {
				t.Errorf("n=%d %s: nothing masked", n, name)
			}
		}
	}
}
