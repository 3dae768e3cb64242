package kubernetes

import (
	"fmt"
	"strings"
	"testing"
)

// The attacks on image_pull_secrets: a name that is a path or carries control characters (it
// would be a Secret name the API server refuses at every Start, or a line of its own in a
// message), ten thousand names (every pod would carry them), a name twice, and names of
// agora's own Secrets (a dispatch's token and egress proxy password are Opaque, and no
// registry credential). Each is refused, by New too, before any object is made.
func TestCheckPullSecrets_Attacks(t *testing.T) {
	many := make([]string, 10_000)
	for i := range many {
		many[i] = fmt.Sprintf("cred-%d", i)
	}
	for name, c := range map[string]struct {
		names []string
		want  string
	}{
		"path":            {[]string{"../../kube-system/regcred"}, "not a Secret name"},
		"slash":           {[]string{"ns/regcred"}, "not a Secret name"},
		"newline":         {[]string{"regcred\nimage pull secret \"x\" ok"}, "not a Secret name"},
		"nul":             {[]string{"reg\x00cred"}, "not a Secret name"},
		"escape":          {[]string{"reg\x1b[2Jcred"}, "not a Secret name"},
		"upper":           {[]string{"RegCred"}, "not a Secret name"},
		"empty":           {[]string{""}, "not a Secret name"},
		"dot label":       {[]string{"reg..cred"}, "not a Secret name"},
		"too long":        {[]string{strings.Repeat("a", 254)}, "not a Secret name"},
		"ten thousand":    {many, "10000 names; at most 16"},
		"twice":           {[]string{"regcred", "mirror", "regcred"}, `"regcred" is listed twice`},
		"dispatch secret": {[]string{"regcred", objectName("01JABCDEFGHJKMNPQRSTVWXYZ0")}, "agora's own Secrets"},
		"slot secret":     {[]string{"agora-s0123456789abcdef0123456789abcdef"}, "agora's own Secrets"},
	} {
		err := CheckPullSecrets(c.names)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckPullSecrets = %v, want %q", name, err, c.want)
			continue
		}
		if strings.ContainsAny(err.Error(), "\n\x00\x1b") || len(err.Error()) > 400 {
			t.Errorf("%s: the error carries a control character or %d bytes: %q", name, len(err.Error()), err)
		}
		o := testOptions(t, &fakeExporter{})
		o.PullSecrets = c.names
		if _, err := newProvider(o, nil); err == nil || !strings.Contains(err.Error(), "image_pull_secrets") {
			t.Errorf("%s: newProvider = %v, want refused naming image_pull_secrets", name, err)
		}
	}
	ok := []string{"regcred", "mirror.example.com", "a", strings.Repeat("b", 63) + "." + strings.Repeat("c", 63)}
	if err := CheckPullSecrets(ok); err != nil {
		t.Errorf("valid names refused: %v", err)
	}
	if err := CheckPullSecrets(many[:MaxPullSecrets]); err != nil {
		t.Errorf("%d names refused: %v", MaxPullSecrets, err)
	}
}

func TestCheckPullPolicy(t *testing.T) {
	for _, p := range []string{"", "IfNotPresent", "Always", "Never"} {
		if err := CheckPullPolicy(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for _, p := range []string{"always", "IfNotPresent ", "Sometimes", "Never\n"} {
		if err := CheckPullPolicy(p); err == nil {
			t.Errorf("%q accepted", p)
		}
		o := testOptions(t, &fakeExporter{})
		o.PullPolicy = p
		if _, err := newProvider(o, nil); err == nil || !strings.Contains(err.Error(), "image_pull_policy") {
			t.Errorf("%q: newProvider = %v", p, err)
		}
	}
}
