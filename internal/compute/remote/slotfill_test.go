package remote

import (
	"errors"
	"testing"
)

// MatchSlotPlaces pairs a dispatch's read-only mounts with a slot's places, or refuses: a
// read-only mount without its place, a place without its mount, a file where the slot has a
// directory, a writable mount at or below a place (the worker cannot make it in a read-only
// mount).
func TestMatchSlotPlaces(t *testing.T) {
	places := []SlotPlace{{Dst: "/agora/bundle"}, {Dst: "/etc/ssl/certs/ca-certificates.crt", File: true}}
	ok := []Mount{
		{Name: "bundle", Dst: "/agora/bundle", Fetch: true},
		{Name: "trust", Dst: "/etc/ssl/certs/ca-certificates.crt", File: true, Fetch: true},
		{Name: "out", Dst: "/agora/out", Writable: true, Result: true},
		{Name: "gateway", Dst: "/agora/gateway", Writable: true, Sockets: []string{"gateway.sock"}},
	}
	if m, err := MatchSlotPlaces(places, ok); err != nil || m[0].Name != "bundle" || m[1].Name != "trust" {
		t.Fatalf("MatchSlotPlaces = %v, %v", m, err)
	}
	for _, tc := range []struct {
		name   string
		mounts []Mount
	}{
		{"no place", append(ok[:2:2], Mount{Name: "inputs", Dst: "/agora/inputs", Fetch: true})},
		{"no mount", ok[:1]},
		{"file for a directory", []Mount{{Name: "bundle", Dst: "/agora/bundle", File: true}, ok[1]}},
		{"writable below a place", append(ok[:2:2], Mount{Name: "x", Dst: "/agora/bundle/x", Writable: true})},
		{"writable at a place", []Mount{{Name: "bundle", Dst: "/agora/bundle", Writable: true}, ok[1]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := MatchSlotPlaces(places, tc.mounts); !errors.Is(err, ErrNotSlotPlace) {
				t.Errorf("got %v, want ErrNotSlotPlace", err)
			}
		})
	}
}

func TestParseSlotPlaces(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`[]`, true},
		{`[{"dst":"/agora/bundle"},{"dst":"/agora/bundle/manifest.json","file":true}]`, true},
		{`[{"dst":"/agora/x","file":true},{"dst":"/agora/x/y"}]`, false},
		{`[{"dst":"agora"}]`, false},
		{`[{"dst":"/agora/../etc"}]`, false},
		{`[{"dst":"/"}]`, false},
		{`[{"dst":"/a"},{"dst":"/a"}]`, false},
		{`[{"dst":"/a","extra":1}]`, false},
		{`[] []`, false},
	} {
		if _, err := ParseSlotPlaces(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseSlotPlaces(%s) = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

func FuzzParseSlotPlaces(f *testing.F) {
	f.Add(`[{"dst":"/agora/bundle"},{"dst":"/agora/bundle/manifest.json","file":true}]`)
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseSlotPlaces(s)
		if err != nil {
			return
		}
		if err := CheckSlotPlaces(ps); err != nil {
			t.Fatalf("parsed places fail their check: %v", err)
		}
	})
}
