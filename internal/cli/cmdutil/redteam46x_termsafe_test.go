package cmdutil_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// `agora dispatch logs` on a terminal (termsafe.go escapeWriter).

// termSafe fails t when s could act on a terminal: invalid UTF-8, or any character
// agenttext.Hidden reports (ESC, C1 CSI U+009B, bidi overrides, ...).
func termSafe(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("%s: output is not valid UTF-8: %q", what, s)
	}
	for _, r := range s {
		if agenttext.Hidden(r) {
			t.Fatalf("%s: output carries %U raw: %q", what, r, s)
		}
	}
}

// through writes the chunks through a fresh terminal agentOut and closes it.
func through(t *testing.T, chunks ...[]byte) string {
	t.Helper()
	var out bytes.Buffer
	w := cmdutil.AgentOut(&cmdutil.Factory{IO: &cmdutil.IOStreams{Out: &out, OutTTY: true}})
	for _, c := range chunks {
		if n, err := w.Write(c); err != nil || n != len(c) {
			t.Fatalf("write %q: %d, %v", c, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// nasty is every kind of sequence a log may carry to act on a terminal, including multi-byte
// controls (C1 CSI and NEL as UTF-8, bidi overrides, a tag character, zero-width joiner), and
// invalid UTF-8 (a lone lead byte before a control, a truncated 4-byte character, an
// overlong ESC, a surrogate).
const nasty = "a\x1b[31mR\x1b]52;c;ZXZpbA==\x07\x1b]8;;http://x\x1b\\L\x1b\\" +
	"\u009b2J\u0085\u202e\u2066\u200d\U000E0041\u2028" +
	"é😀\xe2\x80\x1b[0m\xf0\x9f\x98\xc0\x9b\xed\xa0\x80\xff\xfe" +
	"z\r\x08\x7f\x00end"

// TestRedTeam46xTermsafe_EverySplit: the nasty log split at every offset and at every pair of
// offsets: the terminal never gets a raw control, bidi or invisible character nor invalid
// UTF-8; for the valid-UTF-8 part, the text is exactly what one write gives.
func TestRedTeam46xTermsafe_EverySplit(t *testing.T) {
	in := []byte(nasty)
	for i := 0; i <= len(in); i++ {
		termSafe(t, "split at "+string(rune('0'+i%10)), through(t, in[:i], in[i:]))
		for j := i; j <= len(in); j++ {
			termSafe(t, "split twice", through(t, in[:i], in[i:j], in[j:]))
		}
	}
	valid := []byte(strings.ToValidUTF8(nasty, "?"))
	want := agenttext.Escape(string(valid))
	for i := 0; i <= len(valid); i++ {
		for j := i; j <= len(valid); j++ {
			if got := through(t, valid[:i], valid[i:j], valid[j:]); got != want {
				t.Fatalf("valid UTF-8 split at %d and %d: %q, want %q", i, j, got, want)
			}
		}
	}
}

// TestRedTeam46xTermsafe_ByteAtATimeAndRandomChunks: one byte per write, empty writes, and
// random chunkings (seeded) of a long log built from the nasty pieces.
func TestRedTeam46xTermsafe_ByteAtATimeAndRandomChunks(t *testing.T) {
	long := bytes.Repeat([]byte(nasty), 300)
	var chunks [][]byte
	for i := range long {
		chunks = append(chunks, nil, long[i:i+1])
	}
	termSafe(t, "a byte at a time", through(t, chunks...))
	rng := rand.New(rand.NewPCG(46, 46))
	for range 50 {
		var cs [][]byte
		for s := long; len(s) > 0; {
			n := min(len(s), rng.IntN(9))
			cs = append(cs, s[:n])
			s = s[n:]
		}
		termSafe(t, "random chunks", through(t, cs...))
	}
}

// TestRedTeam46xTermsafe_CloseMidRune: a write ending inside a character, then Close: the
// held bytes come out as U+FFFD, never raw; a held lead byte of a C1 control (0xC2) closed
// without its second byte is not U+009B.
func TestRedTeam46xTermsafe_CloseMidRune(t *testing.T) {
	for _, tail := range []string{"\xc2", "\xe2\x80", "\xf0\x9f\x98", "\xe2", "\xf0"} {
		got := through(t, []byte("x"+tail))
		termSafe(t, "close mid-rune", got)
		if got != "x\uFFFD" {
			t.Errorf("close after %q: %q, want x and one U+FFFD", tail, got)
		}
	}
	// A lead byte held across a write that starts with a new lead byte: both invalid.
	got := through(t, []byte("\xc2"), []byte("\xc2\x9b[2J"))
	termSafe(t, "held lead + C1", got)
	if !strings.Contains(got, `\u009b`) {
		t.Errorf("C1 CSI after a held lead byte: %q", got)
	}
	// A held partial character completed into a bidi override by the next write is escaped.
	got = through(t, []byte("a\xe2\x80"), []byte("\xaeb"))
	if got != `a\u202eb` {
		t.Errorf("U+202E across writes: %q", got)
	}
}
