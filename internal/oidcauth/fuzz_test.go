package oidcauth

import (
	"reflect"
	"testing"
)

// FuzzParseClaims feeds arbitrary payloads to the claims parser: it must refuse or read, never
// panic, and what it reads must satisfy its own checks.
func FuzzParseClaims(f *testing.F) {
	f.Add([]byte(`{"iss":"https://id.example","sub":"u1","aud":["agora"],"exp":1900000000,"groups":["platform"]}`), "groups")
	f.Add([]byte(`{"iss":"x","sub":"u","aud":"a","exp":1.5,"nbf":1,"roles":"admin"}`), "roles")
	f.Add([]byte(`{"sub":"u","Sub":"v","exp":1}`), "groups")
	f.Add([]byte(`{"sub":"u","exp":1,"groups":[1,2]}`), "groups")
	f.Add([]byte(`{"sub":"u","exp":1,"nonce":"n","azp":"agora-web"}`), "groups")
	f.Add([]byte(`{"sub":"u","exp":1,"nonce":1,"azp":["a"]}`), "groups")
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

// FuzzParseKeySet feeds arbitrary key sets (what a provider, or whoever answers in its place,
// serves at jwks_uri): refused or read, never a panic, and every key read is a public signing
// key with an id.
func FuzzParseKeySet(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"}]}`))
	f.Add([]byte(`{"keys":[],"Keys":[]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","kid":"e","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		keys, err := parseKeySet(body)
		if err != nil {
			return
		}
		for kid, k := range keys {
			if kid == "" || kid != k.KeyID || !k.IsPublic() || !k.Valid() {
				t.Fatalf("kept key %q: public %v valid %v", kid, k.IsPublic(), k.Valid())
			}
		}
	})
}

// FuzzParseTokenResponse feeds arbitrary token endpoint answers (what a provider, or whoever
// answers in its place, returns for a code) to their parser: it must refuse or read, never
// panic, and a read id_token is a string the verifier then judges.
func FuzzParseTokenResponse(f *testing.F) {
	f.Add([]byte(`{"access_token":"a","token_type":"Bearer","id_token":"x.y.z","expires_in":3600}`))
	f.Add([]byte(`{"error":"invalid_grant","error_description":"code used"}`))
	f.Add([]byte(`{"id_token":"a","ID_TOKEN":"b"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		tok, code, err := parseTokenResponse(body)
		if err != nil && (tok != "" || code != "") {
			t.Fatalf("refused, yet returned %q %q", tok, code)
		}
	})
}

// FuzzParseClaims_MatchesTwoPass holds the one-pass claims decode to the two-pass one it
// replaced (strictjson, then encoding/json twice): the same payloads are refused, and from
// the others the same claims are read (null members, quoted numbers, escapes, null list
// elements, a groups claim named like another claim included).
func FuzzParseClaims_MatchesTwoPass(f *testing.F) {
	for _, s := range []string{
		`{"iss":"https://id.example","sub":"u1","aud":["agora"],"exp":1900000000,"groups":["platform"]}`,
		`{"iss":"x","sub":"u","aud":"a","exp":1.5,"nbf":1,"roles":"admin"}`,
		`{"sub":"u","Sub":"v","exp":1}`, `{"sub":"u","exp":1,"groups":[1,2]}`,
		`{"sub":"u","exp":1,"nonce":"n","azp":"agora-web"}`, `{"sub":"u","exp":1,"nonce":1,"azp":["a"]}`,
		`{"iss":null,"sub":"u","aud":null,"exp":"12","nbf":null,"nonce":null,"groups":["a",null,"\u0062"]}`,
		`{"sub":"\u0075\n","exp":"","groups":[]}`, `{"sub":"u","exp":1,"groups":"g","aud":[ "a" , "b" ]}`,
		`null`, `[]`, `{"sub":"u","exp":true}`, `{"sub":"u","exp":1e400}`, `{"sub":"u","exp":-0.5e1}`,
		`{"sub":"u","exp":1,"aud":{"a":1}}`, `{"sub":"u","exp":1,"groups":[["a"]]}`, `{"\u017Fub":"u","exp":1}`,
	} {
		for _, g := range []string{"groups", "sub", "aud", ""} {
			f.Add([]byte(s), g)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte, groupsClaim string) {
		got, err := parseClaims(payload, groupsClaim)
		want, errWant := parseClaimsTwoPass(payload, groupsClaim)
		if (err == nil) != (errWant == nil) {
			t.Fatalf("parseClaims(%q, %q): one pass %v, two passes %v", payload, groupsClaim, err, errWant)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("parseClaims(%q, %q): one pass read %+v, two passes %+v", payload, groupsClaim, got, want)
		}
	})
}
