package oidcauth

import (
	"testing"
)

// FuzzParseClaims feeds arbitrary payloads to the claims parser: it must refuse or read, never
// panic, and what it reads must satisfy its own checks.
func FuzzParseClaims(f *testing.F) {
	f.Add([]byte(`{"iss":"https://id.example","sub":"u1","aud":["agora"],"exp":1900000000,"groups":["platform"]}`), "groups")
	f.Add([]byte(`{"iss":"x","sub":"u","aud":"a","exp":1.5,"nbf":1,"roles":"admin"}`), "roles")
	f.Add([]byte(`{"sub":"u","Sub":"v","exp":1}`), "groups")
	f.Add([]byte(`{"sub":"u","exp":1,"groups":[1,2]}`), "groups")
	f.Fuzz(func(t *testing.T, payload []byte, groupsClaim string) {
		c, err := parseClaims(payload, groupsClaim)
		if err != nil {
			return
		}
		if c.Subject == "" || len(c.Subject) > maxSubject || !printable(c.Subject) {
			t.Fatalf("accepted subject %q", c.Subject)
		}
		if c.Expiry.IsZero() {
			t.Fatal("accepted a token without exp")
		}
		if len(c.Groups) > maxGroups {
			t.Fatalf("accepted %d groups", len(c.Groups))
		}
	})
}
