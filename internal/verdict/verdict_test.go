package verdict

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSpec_JSONRoundTrip(t *testing.T) {
	s := Spec{Command: []string{"go", "test", "./..."}, Timeout: 90 * time.Second, Protect: []string{"**/*_test.go"}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"command":["go","test","./..."],"timeout":"1m30s","protect":["**/*_test.go"]}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParseSpec_Refuses(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"empty command", `{"command":[]}`, "empty"},
		{"unknown key", `{"command":["true"],"shell":true}`, "shell"},
		{"case folded key", `{"Command":["true"]}`, "Command"},
		{"duplicate key", `{"command":["true"],"command":["false"]}`, "command"},
		{"bad timeout", `{"command":["true"],"timeout":"soon"}`, "soon"},
		{"zero timeout", `{"command":["true"],"timeout":"0s"}`, "0s"},
		{"long timeout", `{"command":["true"],"timeout":"25h"}`, "at most"},
		{"negative timeout", `{"command":["true"],"timeout":"-1s"}`, "more than 0s"},
		{"bad glob", `{"command":["true"],"protect":["/etc/**"]}`, "relative"},
		{"glob twice", `{"command":["true"],"protect":["a","a"]}`, "twice"},
		{"NUL", `{"command":["a\u0000b"]}`, "NUL"},
		{"empty program", `{"command":[""]}`, "empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestVerdict_ParseRoundTripAndCheck(t *testing.T) {
	var tl Tail
	tl.Write([]byte("--- FAIL: TestX\nFAIL\n"))
	v := Red(ReasonExit, "exit status 1", 1, []string{"go", "test"}, 1500*time.Millisecond, tl.Text())
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if back.Digest() != v.Digest() || !strings.HasPrefix(v.Digest(), "sha256:") {
		t.Errorf("digest %s, %s", v.Digest(), back.Digest())
	}
	if v.Took() != 1500*time.Millisecond {
		t.Errorf("took %s", v.Took())
	}
	for _, c := range []struct {
		name  string
		edit  func(*Verdict)
		wantE string
	}{
		{"tail changed after hashing", func(v *Verdict) { v.OutputTail = "ok\n" }, "output_sha256"},
		{"passed with a reason", func(v *Verdict) { v.Passed = true }, "passed but"},
		{"unknown reason", func(v *Verdict) { v.Reason = "looks-fine" }, "looks-fine"},
		{"tail too long", func(v *Verdict) { v.OutputTail = strings.Repeat("x", MaxTail+1); v.OutputBytes = MaxTail + 1 }, "at most"},
		{"no command", func(v *Verdict) { v.Command = nil }, "empty"},
		{"relative cache", func(v *Verdict) { v.Cache = "cache" }, "verdict cache"},
		{"unclean cache", func(v *Verdict) { v.Cache = "/var/cache/../../root" }, "verdict cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := v
			c.edit(&w)
			b, _ := json.Marshal(w)
			if _, err := Parse(b); err == nil || !strings.Contains(err.Error(), c.wantE) {
				t.Errorf("got %v, want an error containing %q", err, c.wantE)
			}
		})
	}
	if _, err := Parse([]byte(`{"passed":true,"Passed":false}`)); err == nil {
		t.Error("a case-folded duplicate key was accepted")
	}
}

func TestVerdict_DigestBindsEveryField(t *testing.T) {
	base := Green([]string{"true"}, time.Second, TailText{Text: "ok", Total: 2})
	seen := map[string]string{base.Digest(): "base"}
	for name, v := range map[string]Verdict{
		"exit":      Red(ReasonExit, "exit status 2", 2, []string{"true"}, time.Second, TailText{Text: "ok", Total: 2}),
		"tail":      Green([]string{"true"}, time.Second, TailText{Text: "ok!", Total: 3}),
		"duration":  Green([]string{"true"}, 2*time.Second, TailText{Text: "ok", Total: 2}),
		"command":   Green([]string{"false"}, time.Second, TailText{Text: "ok", Total: 2}),
		"protected": Protected([]string{"true"}, []string{"a_test.go"}),
		"cache":     func() Verdict { v := base; v.Cache = "/var/cache/agora-verify"; return v }(),
	} {
		d := v.Digest()
		if other, ok := seen[d]; ok {
			t.Errorf("%s has the digest of %s", name, other)
		}
		seen[d] = name
	}
}

func TestProtected_CapsAndNames(t *testing.T) {
	var paths []string
	for i := range MaxProtectedPaths + 5 {
		paths = append(paths, strings.Repeat("p", 1+i%3)+"_test.go")
	}
	v := Protected([]string{"go", "test"}, paths)
	if v.Passed || v.Reason != ReasonProtected || v.Exit != -1 || len(v.ProtectedPaths) != MaxProtectedPaths {
		t.Fatalf("got %+v", v)
	}
	if !strings.Contains(v.Detail, "and 5 more") || !strings.Contains(v.Detail, "did not run") {
		t.Errorf("detail %q", v.Detail)
	}
	if err := v.Check(); err != nil {
		t.Error(err)
	}
}

func TestTail_KeepsTheEnd(t *testing.T) {
	var tl Tail
	for i := range 5000 {
		tl.Write([]byte(strings.Repeat("é", i%7) + "line\n"))
	}
	got := tl.Text()
	if len(got.Text) > MaxTail || !strings.HasSuffix(got.Text, "line\n") {
		t.Fatalf("tail of %d bytes ends %q", len(got.Text), got.Text[len(got.Text)-10:])
	}
	if strings.HasPrefix(got.Text, "\uFFFD") {
		t.Error("a cut character became U+FFFD instead of being dropped")
	}
	var big Tail
	big.Write([]byte(strings.Repeat("a", 3*MaxTail) + "END"))
	if g := big.Text(); len(g.Text) != MaxTail || !strings.HasSuffix(g.Text, "END") || g.Total != 3*MaxTail+3 {
		t.Errorf("got %d bytes, total %d", len(g.Text), g.Total)
	}
	var bad Tail
	bad.Write([]byte("ok\xff\xfe"))
	if g := bad.Text().Text; g != "ok\uFFFD" {
		t.Errorf("got %q", g)
	}
}
