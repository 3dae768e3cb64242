package selftest_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agora-dev/agora/internal/selftest"
)

// TestCorpus holds the built-in corpus to its floor: every file parses, and there are at
// least 30 attacks and 5 legitimate operations across the classes agora claims to stop.
func TestCorpus(t *testing.T) {
	all, err := selftest.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	attacks, legit := 0, 0
	classes := map[string]bool{}
	for _, a := range all {
		classes[a.Class] = true
		if a.Expect == selftest.Blocked {
			attacks++
		} else {
			legit++
		}
	}
	if attacks < 30 || legit < 5 {
		t.Errorf("corpus has %d attacks and %d legitimate operations; want at least 30 and 5", attacks, legit)
	}
	for _, c := range []string{"host-read", "write-outside", "privilege", "network", "resources", "persistence", "legitimate"} {
		if !classes[c] {
			t.Errorf("no attack of class %s", c)
		}
	}
}

// TestLoad_Refuses keeps a malformed attack out of the corpus, naming its file.
func TestLoad_Refuses(t *testing.T) {
	for name, body := range map[string]string{
		"no expect":       "# class: a\n# control: sandbox\n# reason: r\ntrue\n",
		"bad expect":      "# class: a\n# expect: maybe\n# control: sandbox\n# reason: r\n",
		"unknown key":     "# class: a\n# expect: blocked\n# control: sandbox\n# reason: r\n# colour: red\n",
		"observe arg":     "# class: a\n# expect: blocked\n# control: sandbox\n# reason: r\n# observe: reason\n",
		"unknown needs":   "# class: a\n# expect: blocked\n# control: sandbox\n# reason: r\n# needs: luck\n",
		"unknown observe": "# class: a\n# expect: blocked\n# control: sandbox\n# reason: r\n# observe: vibes\n",
		"logs size":       "# class: a\n# expect: blocked\n# control: limits\n# reason: r\n# observe: logs 5GB\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := selftest.Load(fstest.MapFS{"c/x.sh": {Data: []byte(body)}}, "c")
			if err == nil || !strings.Contains(err.Error(), "c/x.sh") {
				t.Fatalf("Load = %v, want an error naming c/x.sh", err)
			}
		})
	}
	if _, err := selftest.Load(fstest.MapFS{"c/Bad_Id.sh": {Data: []byte("# class: a\n")}}, "c"); err == nil {
		t.Fatal("an id with capitals and _ was accepted")
	}
}

// TestConfigFor copies the target, egress and worker settings, and nothing else.
func TestConfigFor(t *testing.T) {
	raw := []byte(`callbacks: {url: https://x}
egress:
  allow_private: [10.1.0.0/16]
targets:
  local:
    memory: 1GiB
  other:
    sandbox: none
`)
	got, err := selftest.ConfigFor(raw, "local")
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	for _, want := range []string{"10.1.0.0/16", "local:", "memory: 1GiB"} {
		if !strings.Contains(s, want) {
			t.Errorf("ConfigFor lacks %q:\n%s", want, s)
		}
	}
	for _, not := range []string{"other", "sandbox: none", "callbacks"} {
		if strings.Contains(s, not) {
			t.Errorf("ConfigFor copied %q:\n%s", not, s)
		}
	}
	if _, err := selftest.ConfigFor(raw, "missing"); err == nil {
		t.Error("ConfigFor of a target agora.yaml lacks succeeded")
	}
	if got, err := selftest.ConfigFor(nil, "local"); err != nil || strings.Contains(string(got), "targets") {
		t.Errorf("ConfigFor(no agora.yaml, local) = %q, %v; want the default target", got, err)
	}
}

// TestCorpus_Documented keeps docs/selftest.md's corpus table whole: every attack is listed
// there with its class and expected outcome.
func TestCorpus_Documented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/selftest.md")
	if err != nil {
		t.Fatal(err)
	}
	all, err := selftest.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		row := fmt.Sprintf("| `%s` | %s | %s | %s |", a.ID, a.Class, a.Expect, a.Control)
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/selftest.md lacks the row %s", row)
		}
	}
}
