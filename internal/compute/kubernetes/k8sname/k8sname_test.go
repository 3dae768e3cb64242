package k8sname

import (
	"strings"
	"testing"
)

func TestObjectName(t *testing.T) {
	for _, c := range []struct{ id, want string }{
		{"01JABCDEFGHJKMNPQRSTVWXYZ0", "agora-01jabcdefghjkmnpqrstvwxyz0"},
		{"abc-1", "agora-abc-1"},
	} {
		if got := ObjectName(c.id); got != c.want {
			t.Errorf("ObjectName(%q) = %q, want %q", c.id, got, c.want)
		}
	}
	// Ids that would meet once lowercased or mapped keep apart through the hash.
	for _, pair := range [][2]string{{"aB", "ab"}, {"a_b", "a-b"}, {"a.b", "a-b"}, {strings.Repeat("A", 63), strings.Repeat("A", 62) + "B"}} {
		a, b := ObjectName(pair[0]), ObjectName(pair[1])
		if a == b {
			t.Errorf("ObjectName(%q) = ObjectName(%q) = %q", pair[0], pair[1], a)
		}
		for _, n := range []string{a, b} {
			if !IsDNSLabel(n) {
				t.Errorf("objectName gave %q, not a DNS label", n)
			}
		}
	}
}

func TestTaskID(t *testing.T) {
	ns, name, err := ParseTaskID(FormatTaskID("agents", "agora-01jx"))
	if err != nil || ns != "agents" || name != "agora-01jx" {
		t.Fatalf("round trip = %q %q %v", ns, name, err)
	}
	for _, bad := range []string{"", "k8s:", "k8s:agents", "k8s:agents/", "k8s:/x", "local:1:2", "k8s:Agents/x",
		"k8s:agents/x/y", "k8s:agents/-x", "docker:abc", "k8s:agents/" + strings.Repeat("a", 64)} {
		if _, _, err := ParseTaskID(bad); err == nil {
			t.Errorf("ParseTaskID(%q) accepted", bad)
		}
	}
}

func TestCheckDispatchID(t *testing.T) {
	for _, ok := range []string{"01JABCDEFGHJKMNPQRSTVWXYZ0", "a", "a.b_c-d"} {
		if err := CheckDispatchID(ok); err != nil {
			t.Errorf("CheckDispatchID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "a b", "a/b", strings.Repeat("a", 64), "é"} {
		if err := CheckDispatchID(bad); err == nil {
			t.Errorf("CheckDispatchID(%q) accepted", bad)
		}
	}
}

func FuzzParseTaskID(f *testing.F) {
	for _, s := range []string{"k8s:agents/agora-01jx", "k8s:a/b", "k8s:/", "local:1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, name, err := ParseTaskID(s)
		if err != nil {
			return
		}
		if FormatTaskID(ns, name) != s || !IsDNSLabel(ns) || !IsDNSLabel(name) {
			t.Errorf("ParseTaskID(%q) = %q %q, not canonical", s, ns, name)
		}
	})
}

func FuzzObjectName(f *testing.F) {
	for _, s := range []string{"01JABCDEFGHJKMNPQRSTVWXYZ0", "a.b_c", strings.Repeat("Z", 63)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if CheckDispatchID(id) != nil {
			return
		}
		if n := ObjectName(id); !IsDNSLabel(n) || !strings.HasPrefix(n, "agora-") {
			t.Errorf("ObjectName(%q) = %q, not a DNS label", id, n)
		}
	})
}

// FuzzCheckPullSecrets: whatever is accepted is a Secret name the API server takes: no '/',
// no control character, at most 253 bytes, not agora's own.
func FuzzCheckPullSecrets(f *testing.F) {
	for _, s := range []string{"regcred", "../x", "agora-01j", "a.b", "a\nb", strings.Repeat("a", 254)} {
		f.Add(s, "b")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if CheckPullSecrets([]string{a, b}) != nil {
			return
		}
		for _, n := range []string{a, b} {
			if n == "" || len(n) > 253 || strings.ContainsAny(n, "/\\ \n\r\t\x00") || strings.HasPrefix(n, "agora-") || n != strings.ToLower(n) {
				t.Fatalf("accepted %q", n)
			}
		}
		if a == b {
			t.Fatalf("accepted %q twice", a)
		}
	})
}
