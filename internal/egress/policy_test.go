package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPolicy_Validate(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name string
		p    Policy
		want string // empty: valid
	}{
		{"zero", Policy{}, ""},
		{"good", Policy{
			AllowPrivate: []netip.Prefix{pfx("10.1.2.0/24"), pfx("127.0.0.1/32"), pfx("fd00::/8")},
			Hosts:        []string{"api.example.com", "*.example.net", "1.1.1.1", "2606:4700::1111"},
		}, ""},
		{"empty hosts", Policy{Hosts: []string{}}, ""},
		{"invalid prefix", Policy{AllowPrivate: []netip.Prefix{{}}}, "invalid"},
		{"host bits set", Policy{AllowPrivate: []netip.Prefix{pfx("10.1.2.3/24")}}, "host bits set (want 10.1.2.0/24)"},
		{"ipv4-mapped prefix", Policy{AllowPrivate: []netip.Prefix{pfx("::ffff:10.0.0.0/104")}}, "IPv4-mapped"},
		{"everything v4", Policy{AllowPrivate: []netip.Prefix{pfx("0.0.0.0/0")}}, "allows every address"},
		{"everything v6", Policy{AllowPrivate: []netip.Prefix{pfx("::/0")}}, "allows every address"},
		{"uppercase host", Policy{Hosts: []string{"API.example.com"}}, "not lowercase"},
		{"trailing dot host", Policy{Hosts: []string{"example.com."}}, "ends in a dot"},
		{"bare star", Policy{Hosts: []string{"*"}}, "not allowed"},
		{"inner star", Policy{Hosts: []string{"a.*.example.com"}}, "not allowed"},
		{"double star", Policy{Hosts: []string{"*.*.example.com"}}, "not allowed"},
		{"star without dot", Policy{Hosts: []string{"*example.com"}}, "not allowed"},
		{"empty host", Policy{Hosts: []string{""}}, "empty host"},
		{"non-canonical v6 literal", Policy{Hosts: []string{"2606:4700:0:0:0:0:0:1111"}}, "canonical form 2606:4700::1111"},
		{"zoned literal", Policy{Hosts: []string{"fe80::1%eth0"}}, "zone"},
		{"non-canonical v4", Policy{Hosts: []string{"127.1"}}, "last label starts with a digit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
