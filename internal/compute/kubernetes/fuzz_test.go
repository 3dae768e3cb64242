package kubernetes

import (
	"net/netip"
	"strings"
	"testing"
)

func FuzzParseTaskID(f *testing.F) {
	for _, s := range []string{"k8s:agents/agora-01jx", "k8s:a/b", "k8s:/", "local:1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, name, err := parseTaskID(s)
		if err != nil {
			return
		}
		if formatTaskID(ns, name) != s || !isDNSLabel(ns) || !isDNSLabel(name) {
			t.Errorf("parseTaskID(%q) = %q %q, not canonical", s, ns, name)
		}
	})
}

func FuzzObjectName(f *testing.F) {
	for _, s := range []string{"01JABCDEFGHJKMNPQRSTVWXYZ0", "a.b_c", strings.Repeat("Z", 63)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if checkDispatchID(id) != nil {
			return
		}
		if n := objectName(id); !isDNSLabel(n) || !strings.HasPrefix(n, "agora-") {
			t.Errorf("objectName(%q) = %q, not a DNS label", id, n)
		}
	})
}

func FuzzCheckImage(f *testing.F) {
	f.Add("busybox@sha256:" + strings.Repeat("0", 64))
	f.Add("busybox:latest")
	f.Fuzz(func(t *testing.T, ref string) {
		if checkImage("image", ref) != nil {
			return
		}
		name, dgst, _ := strings.Cut(ref, "@")
		if name == "" || len(dgst) != len("sha256:")+64 || strings.ContainsAny(ref, " \t\n") {
			t.Errorf("checkImage accepted %q", ref)
		}
	})
}

func FuzzParseGatewayURL(f *testing.F) {
	f.Add("https://10.0.0.1:8443")
	f.Add("https://[::1]:1/")
	f.Add("https://gw.agents.example:8443")
	f.Fuzz(func(t *testing.T, s string) {
		gw, err := parseGatewayURL(s)
		if err != nil {
			return
		}
		ok := gw.port != 0
		if gw.name == "" {
			ok = ok && len(gw.addrs) == 1 && gw.addrs[0].IsValid() && gw.addrs[0].Zone() == ""
		} else {
			// A name must be one a pod's hostAliases takes, and never an address.
			_, perr := netip.ParseAddr(gw.name)
			ok = ok && len(gw.addrs) == 0 && validDNSName(gw.name) && perr != nil && gw.name == strings.ToLower(gw.name)
		}
		if !ok {
			t.Errorf("parseGatewayURL(%q) = %+v", s, gw)
		}
	})
}

func FuzzSplitEnv(f *testing.F) {
	f.Add("A=1\nB=2")
	f.Fuzz(func(t *testing.T, s string) {
		vars, err := splitEnv(strings.Split(s, "\n"))
		if err != nil {
			return
		}
		for _, v := range vars {
			if !isEnvName(v.name) {
				t.Errorf("splitEnv kept name %q", v.name)
			}
		}
	})
}
