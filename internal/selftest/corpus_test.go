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
// least 150 attacks and 25 legitimate operations (docs/selftest.md) across every class of
// boundary agora claims.
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
	if attacks < 150 || legit < 25 {
		t.Errorf("corpus has %d attacks and %d legitimate operations; want at least 150 and 25", attacks, legit)
	}
	for _, c := range []string{"host-read", "write-outside", "privilege", "network", "gateway", "resources", "persistence", "audit", "verdicts", "legitimate"} {
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
		"providers":       "# class: a\n# expect: blocked\n# control: sandbox\n# reason: r\n# providers: local, podman\n",
		"review answer":   "# class: a\n# expect: blocked\n# control: review\n# reason: r\n# observe: review maybe\n",
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

// TestAttack_For: an entry with a providers header runs on those providers only, "" being
// local; one without runs everywhere.
func TestAttack_For(t *testing.T) {
	all, err := selftest.Load(fstest.MapFS{
		"c/only-local.sh": {Data: []byte("# class: a\n# expect: blocked\n# providers: local\n# control: sandbox\n# reason: r\n")},
		"c/anywhere.sh":   {Data: []byte("# class: a\n# expect: blocked\n# control: sandbox\n# reason: r\n")},
	}, "c")
	if err != nil {
		t.Fatal(err)
	}
	anywhere, local := all[0], all[1]
	for _, c := range []struct {
		a        selftest.Attack
		provider string
		want     bool
	}{
		{local, "", true}, {local, "local", true}, {local, "docker", false}, {local, "kubernetes", false},
		{anywhere, "docker", true}, {anywhere, "", true},
	} {
		if got := c.a.For(c.provider); got != c.want {
			t.Errorf("%s.For(%q) = %v, want %v", c.a.ID, c.provider, got, c.want)
		}
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
	got, err := selftest.ConfigWithGateway(raw, "local", "")
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
	if _, err := selftest.ConfigWithGateway(raw, "missing", ""); err == nil {
		t.Error("ConfigFor of a target agora.yaml lacks succeeded")
	}
	if got, err := selftest.ConfigWithGateway(nil, "local", ""); err != nil || strings.Contains(string(got), "targets") {
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
