package obs

import (
	"cmp"
	"errors"
	"fmt"
	"net"
)

// ErrExposedBind refuses a metrics listener off this host without the opt-in.
var ErrExposedBind = errors.New("metrics address is not loopback")

// CheckBind accepts HOST:PORT on a loopback host (127.0.0.1, ::1, localhost), or any host
// when allowRemote: the metrics listener has no token, so exposing it is a decision.
func CheckBind(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("metrics address %q: want HOST:PORT, such as 127.0.0.1:9090", addr)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	shown := cmp.Or(host, "every interface")
	return fmt.Errorf("%w: %s; the metrics listener has no token, so serving it off this host also needs --metrics-allow-remote", ErrExposedBind, shown)
}
