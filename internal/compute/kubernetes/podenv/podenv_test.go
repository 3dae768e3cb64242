package podenv

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
)

func TestSplitEnv(t *testing.T) {
	for _, c := range []struct {
		env []string
		ok  bool
	}{
		{[]string{"A=1", "B_2=x=y"}, true},
		{[]string{"A"}, false},
		{[]string{"1A=x"}, false},
		{[]string{"A-B=x"}, false},
		{[]string{"A=1", "A=2"}, false},
		{[]string{remote.TokenEnv + "=x"}, false},
		{[]string{"PWD=/"}, false},
	} {
		_, err := Split(c.env)
		if (err == nil) != c.ok {
			t.Errorf("Split(%q) = %v, want ok %v", c.env, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "=1") {
			t.Errorf("error %q echoes a value", err)
		}
	}
}

func FuzzSplitEnv(f *testing.F) {
	f.Add("A=1\nB=2")
	f.Fuzz(func(t *testing.T, s string) {
		vars, err := Split(strings.Split(s, "\n"))
		if err != nil {
			return
		}
		for _, v := range vars {
			if !isName(v.Name) {
				t.Errorf("Split kept name %q", v.Name)
			}
		}
	})
}
