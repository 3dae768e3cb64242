package netgw

import (
	"fmt"
	"net/url"
)

// AdvertisedHost returns the host of an https://HOST:PORT URL: where pods reach the gateway
// (gateway.advertise, --advertise), the host its server certificate names.
func AdvertisedHost(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q: want https://HOST:PORT", s)
	}
	return u.Hostname(), nil
}
