// Package redacttest is the reader a hostile sandbox would be: given what reached it and the
// secret it must not learn, it tries the decodings such a reader tries and reports any piece
// of the secret it reads back. Tests of [github.com/agora-dev/agora/internal/secret/redact]
// and of the egress proxy judge masked output with it; it shares no code with the redactor,
// so a gap in one is not hidden by the same gap in the other.
//
// It is for tests only: it tries many decodings of everything it is given, and imports only
// the standard library.
package redacttest

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// MinPiece is the shortest piece of a secret of n bytes that a masked output must not reveal,
// as the redactor's strict mode promises: half the secret, at least 4 and at most 8 bytes, and
// one more per KiB past the first. (Written out again here, not imported: this package shares
// no code with the redactor.)
func MinPiece(n int) int { return max(4, min(8, n/2)) + (n+1023)/1024 - 1 }

// Leak returns the longest piece of secret, at least min bytes long, that can be read back
// from out, and how it was read; nil when there is none. It tries out as is, with all white
// space removed, with percent, backslash (JSON, C, octal) and HTML numeric escapes decoded,
// then every run of base64 (standard or URL-safe, at each of the four offsets) and of hex (at
// both nibble offsets) in each of those, and the same once more on what those decode to.
// Letters compare without case.
func Leak(out, secret []byte, min int) (piece []byte, how string) {
	if min <= 0 || len(secret) < min {
		return nil, ""
	}
	lowSecret := bytes.ToLower(secret)
	// Every window of min bytes of the secret, by its text: where it starts in the secret.
	windows := map[string][]int{}
	for i := 0; i+min <= len(lowSecret); i++ {
		w := string(lowSecret[i : i+min])
		windows[w] = append(windows[w], i)
	}
	var best []byte
	var bestHow string
	check := func(text []byte, how string) {
		low := bytes.ToLower(text)
		for p := 0; p+min <= len(low); p++ {
			for _, i := range windows[string(low[p:p+min])] {
				n := min
				for i+n < len(lowSecret) && p+n < len(low) && low[p+n] == lowSecret[i+n] {
					n++
				}
				if n > len(best) {
					best, bestHow = secret[i:i+n], how
				}
			}
		}
	}
	level := []named{{out, "as sent"}}
	for depth := range 3 {
		var next []named
		for _, t := range level {
			for _, v := range variants(t) {
				check(v.b, v.how)
				if depth < 2 {
					next = append(next, decodeRuns(v)...)
				}
			}
		}
		level = next
	}
	return best, bestHow
}

type named struct {
	b   []byte
	how string
}

// variants are t, t without white space, t unescaped, and t unescaped without white space.
func variants(t named) []named {
	u := unescape(t.b)
	return []named{t, {stripSpace(t.b), t.how + ", white space removed"}, {u, t.how + ", unescaped"},
		{stripSpace(u), t.how + ", unescaped, white space removed"}}
}

func stripSpace(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r', '\v', '\f':
		default:
			out = append(out, c)
		}
	}
	return out
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isB64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
}

// unescape decodes %XX, \uXXXX (with surrogate pairs), \xXX, \NNN (octal), the one-letter
// backslash escapes and &#N; / &#xH; wherever they appear, in one pass.
func unescape(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '%' && i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2]):
			v, _ := strconv.ParseUint(string(b[i+1:i+3]), 16, 8)
			out = append(out, byte(v))
			i += 2
		case c == '\\' && i+5 < len(b) && b[i+1] == 'u' && allHex(b[i+2:i+6]):
			v, _ := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
			r := rune(v)
			i += 5
			if 0xD800 <= r && r < 0xDC00 && i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' && allHex(b[i+3:i+7]) {
				lo, _ := strconv.ParseUint(string(b[i+3:i+7]), 16, 32)
				r = 0x10000 + (r-0xD800)<<10 + (rune(lo) - 0xDC00)
				i += 6
			}
			out = utf8.AppendRune(out, r)
		case c == '\\' && i+3 < len(b) && b[i+1] == 'x' && isHex(b[i+2]) && isHex(b[i+3]):
			v, _ := strconv.ParseUint(string(b[i+2:i+4]), 16, 8)
			out = append(out, byte(v))
			i += 3
		case c == '\\' && i+3 < len(b) && isOct(b[i+1]) && isOct(b[i+2]) && isOct(b[i+3]):
			v, _ := strconv.ParseUint(string(b[i+1:i+4]), 8, 16)
			out = append(out, byte(v))
			i += 3
		case c == '\\' && i+1 < len(b) && bytes.IndexByte([]byte(`"\/'`), b[i+1]) >= 0:
			out = append(out, b[i+1])
			i++
		case c == '&' && i+3 < len(b) && b[i+1] == '#':
			j := bytes.IndexByte(b[i:min(len(b), i+12)], ';')
			if j < 0 {
				out = append(out, c)
				continue
			}
			num := string(b[i+2 : i+j])
			base := 10
			if len(num) > 0 && (num[0] == 'x' || num[0] == 'X') {
				num, base = num[1:], 16
			}
			v, err := strconv.ParseUint(num, base, 32)
			if err != nil {
				out = append(out, c)
				continue
			}
			out = utf8.AppendRune(out, rune(v))
			i += j
		default:
			out = append(out, c)
		}
	}
	return out
}

func allHex(b []byte) bool {
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return true
}

func isOct(c byte) bool { return '0' <= c && c <= '7' }

// decodeRuns decodes every maximal base64 run (at offsets 0-3, both alphabets at once) and
// every maximal hex run (at offsets 0 and 1) of t.
func decodeRuns(t named) []named {
	var out []named
	b := t.b
	for i := 0; i < len(b); {
		if !isB64(b[i]) {
			i++
			continue
		}
		j := i
		for j < len(b) && (isB64(b[j]) || b[j] == '=') {
			j++
		}
		run := bytes.TrimRight(b[i:j], "=")
		if len(run) >= 6 {
			for off := range 4 {
				if off < len(run) {
					out = append(out, named{b64(run[off:]), t.how + ", base64-decoded"})
				}
			}
		}
		i = j
	}
	for i := 0; i < len(b); {
		if !isHex(b[i]) {
			i++
			continue
		}
		j := i
		for j < len(b) && isHex(b[j]) {
			j++
		}
		if j-i >= 8 {
			for off := range 2 {
				out = append(out, named{hexDecode(b[i+off : j]), t.how + ", hex-decoded"})
			}
		}
		i = j
	}
	return out
}

// b64 decodes run (either alphabet, no padding), dropping a last partial group.
func b64(run []byte) []byte {
	std := bytes.Map(func(r rune) rune {
		switch r {
		case '-':
			return '+'
		case '_':
			return '/'
		}
		return r
	}, run)
	std = std[:len(std)/4*4+min(len(std)%4, 3)]
	if len(std)%4 == 1 {
		std = std[:len(std)-1]
	}
	d, _ := base64.RawStdEncoding.DecodeString(string(std))
	return d
}

func hexDecode(run []byte) []byte {
	out := make([]byte, 0, len(run)/2)
	for i := 0; i+1 < len(run); i += 2 {
		v, _ := strconv.ParseUint(string(run[i:i+2]), 16, 8)
		out = append(out, byte(v))
	}
	return out
}

// Wrap breaks s every n characters with sep, as `base64` (76, "\n"), PEM (64) and MIME (76,
// "\r\n") do: how tests write a value the way a host would.
func Wrap(s string, n int, sep string) string {
	var b bytes.Buffer
	for len(s) > n {
		b.WriteString(s[:n] + sep)
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}
