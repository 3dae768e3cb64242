package k8stest

import (
	"strings"
	"testing"
)

// An nft listing of the engine's set, as nft 1.0.6 prints it (one element per line past the
// line's width).
const podipsListing = `table inet kube-network-policies {
	set podips-v4 {
		type ipv4_addr
		elements = { 10.251.0.2, 10.251.0.4,
			     10.251.0.12 }
	}
}
`

func TestSetHolds(t *testing.T) {
	for _, tc := range []struct {
		listing, ip string
		want        bool
	}{
		{podipsListing, "10.251.0.2", true},
		{podipsListing, "10.251.0.12", true},
		{podipsListing, "10.251.0.1", false},   // a prefix of .12
		{podipsListing, "10.251.0.123", false}, // .12 is its prefix
		{"table inet kube-network-policies {\n\tset podips-v4 {\n\t\ttype ipv4_addr\n\t}\n}\n", "10.251.0.2", false},
		{"", "10.251.0.2", false},
	} {
		if got := setHolds(tc.listing, tc.ip); got != tc.want {
			t.Errorf("setHolds(%q) = %v, want %v", tc.ip, got, tc.want)
		}
	}
}

// FuzzSetHolds: any listing, no panic; an element the listing names is found.
func FuzzSetHolds(f *testing.F) {
	f.Add(podipsListing, "10.251.0.4")
	f.Add("elements = {", "")
	f.Add("elements = { }", "x")
	f.Fuzz(func(t *testing.T, listing, ip string) {
		got := setHolds(listing, ip)
		if ip == "" && got {
			t.Fatal("an empty address is never an element")
		}
		if ip != "" && !strings.ContainsAny(ip, ", \n\t}") && setHolds("elements = { "+ip+" }", ip) != true {
			t.Fatalf("the element %q is not found", ip)
		}
	})
}
