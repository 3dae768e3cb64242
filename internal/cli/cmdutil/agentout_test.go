package cmdutil

import (
	"bytes"
	"strings"
	"testing"
)

// TestAgentOut: a dispatch's logs reach a terminal escaped (an OSC 52 clipboard write, a
// screen clear, a bidi override), with a character cut between two writes kept whole; piped,
// the bytes pass as they are.
func TestAgentOut(t *testing.T) {
	in := "ok \x1b]52;c;ZXZpbA==\x07 \x1b[2J ünï\u202eevil \xff end"
	want := `ok \x1b]52;c;ZXZpbA==\x07 \x1b[2J ünï\u202eevil ` + "\uFFFD end"
	for _, size := range []int{1, 2, 3, 5, len(in)} {
		var out bytes.Buffer
		w := AgentOut(&Factory{IO: &IOStreams{Out: &out, OutTTY: true}})
		for s := in; s != ""; {
			n := min(size, len(s))
			if _, err := w.Write([]byte(s[:n])); err != nil {
				t.Fatal(err)
			}
			s = s[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("writes of %d bytes: %q, want %q", size, out.String(), want)
		}
	}
	var out bytes.Buffer
	w := AgentOut(&Factory{IO: &IOStreams{Out: &out}})
	w.Write([]byte(in))
	w.Close()
	if out.String() != in {
		t.Errorf("piped: %q, want the bytes as they are", out.String())
	}
	if strings.Contains(want, "\x1b") {
		t.Fatal("the expected terminal text holds an escape")
	}
}
