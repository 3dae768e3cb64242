// Package hostcheck decides whether an HTTP request was addressed to this server (its Host
// header names the bound address: DNS rebinding fails) and whether a browser could have sent
// it from a page this server served (its Origin, or Sec-Fetch-Site without one). The MCP
// server's HTTP transport and the web run view both answer only requests it passes.
//
// It runs on the host side, imports only the standard library, and holds no secret.
package hostcheck

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Names is the set of Host values that name one listening server. It is immutable after
// [New], so one value serves every request concurrently.
type Names struct {
	// hosts are the Host values (lowercased HOST:PORT) that name this server.
	hosts map[string]bool
	// anyLocal: bound to every interface, so the address a connection arrived on also names
	// this server (an IP literal cannot be rebound by DNS).
	anyLocal bool
}

// New returns the names of a server asked to listen on cfgAddr (HOST:PORT as configured),
// bound at bound, and reachable under the extra host names allow (a proxy on this host).
// A loopback bind is also named by localhost.
func New(cfgAddr string, bound net.Addr, allow []string) *Names {
	n := &Names{hosts: map[string]bool{}}
	_, port, _ := net.SplitHostPort(bound.String())
	add := func(h string) {
		h = strings.Trim(h, "[]")
		n.hosts[HostPort(h, port)] = true
		if port == "80" {
			n.hosts[strings.ToLower(strings.TrimSuffix(HostPort(h, port), ":80"))] = true
		}
	}
	if ta, ok := bound.(*net.TCPAddr); ok {
		if ta.IP.IsUnspecified() {
			n.anyLocal = true
		} else {
			add(ta.IP.String())
		}
		if ta.IP.IsLoopback() {
			add("localhost")
		}
	}
	if h, _, err := net.SplitHostPort(cfgAddr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			add(h)
		}
	}
	for _, h := range allow {
		add(h)
	}
	return n
}

// HostOK reports whether the request's Host names this server: the bound address, localhost
// for a loopback bind, an allowed host, or (bound to every interface) the address the
// connection arrived on. A rebound DNS name never matches.
func (n *Names) HostOK(r *http.Request) bool {
	return n.named(strings.ToLower(r.Host), r)
}

func (n *Names) named(host string, r *http.Request) bool {
	if n.hosts[host] {
		return true
	}
	if n.anyLocal {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && strings.ToLower(la.String()) == host {
			return true
		}
	}
	return false
}

// OriginOK reports whether a browser could have sent the request from a page this server
// served: no Origin (and no cross-site Sec-Fetch-Site), or every Origin naming this server.
func (n *Names) OriginOK(r *http.Request) bool {
	origins := r.Header.Values("Origin")
	if len(origins) == 0 {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
			return true
		}
		return false
	}
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return false
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if !n.named(HostPort(u.Hostname(), port), r) {
			return false
		}
	}
	return true
}

// HostPort joins host and port the way a Host header spells them, lowercased.
func HostPort(host, port string) string {
	return strings.ToLower(net.JoinHostPort(host, port))
}
