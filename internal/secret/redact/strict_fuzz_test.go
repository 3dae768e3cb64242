package redact

import (
	"bytes"
	"slices"
	"testing"
)

// FuzzStrictWriter: streaming the strict matcher in any pieces gives what Bytes gives, holds
// back a bounded amount, and the output never holds PieceLen bytes of the secret as written
// (for secrets the skeleton reads as written: no white space, escape starter or bracket).
func FuzzStrictWriter(f *testing.F) {
	f.Add([]byte("fuzz-secret-12345678"), []byte("a fuzz-secret-12345678 b ZnV6ei1zZWNy\nZXQtMTIzNDU2Nzg= c"), []byte{1, 2, 3})
	f.Add([]byte("cafe1234"), []byte(`x \ucafe1234 %ca%fe12 &#99;afe y`), []byte{7})
	f.Add([]byte("aaaaaaaa"), bytes.Repeat([]byte("a"), 300), []byte{0, 255})
	f.Add([]byte("k7M2xq9ZfW4pL8nB3vHy"), []byte("k7M2xq9 \r\n\t fW4pL8n"+string(bytes.Repeat([]byte(" "), 20))+"B3vHy"), []byte{})
	f.Add(canary, append([]byte("x"), canary...), []byte{0, 5, 255})
	f.Fuzz(func(t *testing.T, secret, data, cuts []byte) {
		r := NewStrict([][]byte{secret, canary})
		want := r.Bytes(data)
		var buf bytes.Buffer
		w := r.Writer(&buf).(*strictWriter)
		bound := r.strict.maxLen*(needEscape+maxGap) + needEscape + maxGap
		for i, rest := 0, data; len(rest) > 0; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(int(cuts[i%len(cuts)])+1, len(rest))
			}
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			if len(w.in) > bound {
				t.Fatalf("holding %d bytes, bound %d", len(w.in), bound)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("streamed %q, Bytes %q", buf.Bytes(), want)
		}
		if len(secret) < MinLen || bytes.ContainsAny(secret, " \t\n\r\v\f%\\&[]") {
			return
		}
		p := PieceLen(len(secret))
		for i := 0; i+p <= len(secret); i++ {
			if piece := secret[i : i+p]; !bytes.Contains([]byte(Mask), piece) && bytes.Contains(want, piece) {
				t.Fatalf("output %q holds %q, %d bytes of the secret %q", want, piece, p, secret)
			}
		}
	})
}

// FuzzSkeleton: the normalizer never panics; reading a text in pieces (escapes split across
// them) gives the skeleton reading it whole gives; every skeleton byte maps to a unit inside
// the text, units in order, and white space never reaches the skeleton.
func FuzzSkeleton(f *testing.F) {
	f.Add([]byte(`a%41 \u0042\ud83d\ude00\x43\103&#68;&#x45; \n\t"`), []byte{1, 3})
	f.Add([]byte("%4"), []byte{0})
	f.Add([]byte(`\ud83d\u`), []byte{2})
	f.Add([]byte("&#x10FFFF;&#1114112;&#;&"), []byte{4})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		var whole skeleton
		for whole.pos < len(data) {
			whole.read(data, true)
		}
		var parts skeleton
		end := 0
		for i := 0; end < len(data); i++ {
			n := len(data) - end
			if len(cuts) > 0 {
				n = min(int(cuts[i%len(cuts)])+1, n)
			}
			end += n
			for parts.read(data[:end], false) {
			}
		}
		for parts.pos < len(data) {
			parts.read(data, true)
		}
		if !bytes.Equal(whole.skel, parts.skel) || !slices.Equal(whole.from, parts.from) || !slices.Equal(whole.esc, parts.esc) {
			t.Fatalf("in pieces %q / %v, whole %q / %v", parts.skel, parts.from, whole.skel, whole.from)
		}
		last := -1
		for i, c := range whole.skel {
			from, end := int(whole.from[i]), whole.end(i)
			if from < 0 || end > len(data) || end <= from || from < last {
				t.Fatalf("byte %d maps to [%d, %d) after %d in %d bytes", i, from, end, last, len(data))
			}
			if i > 0 && from != int(whole.from[i-1]) && from < whole.end(i-1) {
				t.Fatalf("byte %d's unit [%d, %d) overlaps the one before", i, from, end)
			}
			last = from
			if isSpaceByte(c) {
				t.Fatalf("white space %q at %d reached the skeleton", c, i)
			}
		}
	})
}
