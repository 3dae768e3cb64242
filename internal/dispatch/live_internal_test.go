package dispatch

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLastLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"\n\n \t\n", ""},
		{"one", "one"},
		{"one\ntwo\n", "two"},
		{"one\n  two  \r\n\n\n", "two"},
		{"partial line without newline", "partial line without newline"},
	} {
		if got := lastLine([]byte(tt.in)); got != tt.want {
			t.Errorf("lastLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzLastLine(f *testing.F) {
	f.Add([]byte("a\nb\n\n"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := lastLine(b)
		if strings.ContainsAny(got, "\n") || got != strings.TrimSpace(got) {
			t.Fatalf("lastLine(%q) = %q: a line, trimmed", b, got)
		}
		if got != "" && !strings.Contains(string(b), got) {
			t.Fatalf("lastLine(%q) = %q, not in the input", b, got)
		}
	})
}

// TestLive_Untrusted: a phase file holding anything but a known phase (with sandbox: none
// the worker can write the stage) is not believed, and a huge log is read from its tail only.
func TestLive_Untrusted(t *testing.T) {
	d := &Dispatcher{StateDir: t.TempDir()}
	id := "01JXXXXXXXXXXXXXXXXXXXXXXX"
	dir := filepath.Join(d.StateDir, id)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, phaseFile), []byte("\x1b[2Jpwned\n"), 0o600)
	big := strings.Repeat("x", 1<<20) + "\nthe end\n"
	os.WriteFile(filepath.Join(dir, stdoutLog), []byte(big), 0o600)
	l := d.Live(id)
	if l.Phase != "" || !l.PhaseSince.IsZero() {
		t.Errorf("phase %q believed", l.Phase)
	}
	if l.LastLine != "the end" {
		t.Errorf("last line %q, want %q", l.LastLine, "the end")
	}
	stageAt(d.StateDir, id).setPhase(PhaseAgent)
	if l := d.Live(id); l.Phase != PhaseAgent {
		t.Errorf("phase %q, want agent", l.Phase)
	}
	for _, unknown := range []string{"01JYYYYYYYYYYYYYYYYYYYYYYY", "../" + id, ".", ""} {
		if l := d.Live(unknown); !reflect.DeepEqual(l, Live{}) {
			t.Errorf("dispatch %q: %+v, want nothing", unknown, l)
		}
	}
	// The tails the web view shows: capped, and a link planted as a log is not followed.
	os.Symlink("/etc/passwd", filepath.Join(dir, stderrLog))
	l = d.Live(id)
	if !strings.HasSuffix(string(l.Stdout), "the end\n") || len(l.Stdout) != liveTail {
		t.Errorf("stdout tail of %d bytes ending %q, want the last %d", len(l.Stdout), l.Stdout[max(len(l.Stdout)-20, 0):], liveTail)
	}
	if len(l.Stderr) != 0 {
		t.Errorf("a symlinked stderr log was read: %.40q", l.Stderr)
	}
}
