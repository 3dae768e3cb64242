package oidcauth

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/egress"
)

// Config is agora.yaml's auth.oidc.
type Config struct {
	// Issuer is the provider's issuer URL exactly as its tokens carry it (https, or http to a
	// loopback address for a provider on this host).
	Issuer string `yaml:"issuer"`
	// Audience is what a token's aud claim must hold: the resource (agora's MCP URL) or the
	// client id the provider puts there.
	Audience string `yaml:"audience"`
	// Resource is the public URL of agora's MCP endpoint (https://agora.example.com/mcp), named
	// in its protected resource metadata; default http://ADDR/mcp of the bound address.
	Resource string `yaml:"resource"`
	// Algorithms allowed for the token's signature; default RS256, PS256, ES256, EdDSA. No
	// symmetric algorithm and no "none" is ever accepted.
	Algorithms []string `yaml:"algorithms"`
	// ClockSkew tolerated on exp, nbf and iat; default 30s, at most 5m.
	ClockSkew time.Duration `yaml:"clock_skew"`
	// GroupsClaim names the claim a rule's group is looked up in; default "groups".
	GroupsClaim string `yaml:"groups_claim"`
	// Rules map claims to a ceiling and a web role; a token matching none gets nothing.
	Rules []Rule `yaml:"rules"`
	// AllowPrivate lets the provider live on a private or loopback address (egress's
	// allow-list, e.g. ["127.0.0.1/32"]); empty: only public addresses.
	AllowPrivate []string `yaml:"allow_private"`
	// Web is the web view's sign-in (the authorization code flow); absent: the web view
	// accepts its static tokens only.
	Web WebClient `yaml:"web"`

	// webAudience marks the copy NewWeb verifies ID tokens with, whose Audience it set to the
	// web client id on purpose; anywhere else that equality is refused (Validate).
	webAudience bool
}

// WebClient is the web view's client at the provider (auth.oidc.web).
type WebClient struct {
	// ClientID is the web view's client id at the provider; its ID tokens' aud holds it.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile is a file (mode 0600 or stricter) holding the client secret; without it
	// the secret is read from AGORA_OIDC_CLIENT_SECRET, and without that the client is public
	// (PKCE only). The secret is never in agora.yaml, argv or a log.
	ClientSecretFile string `yaml:"client_secret_file"`
	// RedirectURL is the callback the provider sends the browser back to, as registered
	// there: the web view's public address and /oidc/callback
	// (https://agora.example.com/oidc/callback).
	RedirectURL string `yaml:"redirect_url"`
}

// WebCallbackPath is the path of the web view's sign-in callback.
const WebCallbackPath = "/oidc/callback"

// Enabled reports whether the web sign-in is configured.
func (w WebClient) Enabled() bool { return w.ClientID != "" }

func (w WebClient) check() error {
	if !w.Enabled() {
		if w.ClientSecretFile != "" || w.RedirectURL != "" {
			return errors.New("auth.oidc.web.client_id is required")
		}
		return nil
	}
	if len(w.ClientID) > 255 || !printable(w.ClientID) {
		return errors.New("auth.oidc.web.client_id: want 1-255 printable characters")
	}
	if err := checkIssuer(w.RedirectURL); err != nil {
		return fmt.Errorf("auth.oidc.web.redirect_url: %w", err)
	}
	if u, _ := url.Parse(w.RedirectURL); u.Path != WebCallbackPath {
		return fmt.Errorf("auth.oidc.web.redirect_url %q: its path must be %s (the web view's callback)", w.RedirectURL, WebCallbackPath)
	}
	return nil
}

// Rule grants Ceiling and Web to a token whose groups claim holds Group, or whose subject is
// Subject (exactly one of the two).
type Rule struct {
	Group   string `yaml:"group"`
	Subject string `yaml:"subject"`
	// Ceiling is the MCP consent ceiling: read, dispatch or orchestrate; empty: no MCP access.
	Ceiling string `yaml:"ceiling"`
	// Web is the web view role: viewer or operator; empty: no web access.
	Web string `yaml:"web"`
}

// Ceilings in order, lowest first (mcpserver's tiers, by name: this package links no server).
var ceilings = []string{"read", "dispatch", "orchestrate"}

// Web roles in order, lowest first.
var webRoles = []string{"viewer", "operator"}

const maxClockSkew = 5 * time.Minute

// defaultAlgorithms are the asymmetric algorithms OIDC providers sign with.
var defaultAlgorithms = []string{"RS256", "PS256", "ES256", "EdDSA"}

// allowedAlgorithms are the only ones a config may name.
var allowedAlgorithms = map[string]bool{"RS256": true, "RS384": true, "RS512": true, "PS256": true, "PS384": true,
	"PS512": true, "ES256": true, "ES384": true, "ES512": true, "EdDSA": true}

// ErrNotConfigured says auth.oidc is absent.
var ErrNotConfigured = errors.New("auth.oidc is not configured")

// Enabled reports whether an issuer is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// Validate checks c and fills its defaults; it reads no network.
func (c *Config) Validate() error {
	if !c.Enabled() {
		return ErrNotConfigured
	}
	if err := checkIssuer(c.Issuer); err != nil {
		return fmt.Errorf("auth.oidc.issuer: %w", err)
	}
	if c.Audience == "" {
		return errors.New("auth.oidc.audience is required: the resource or client id the provider puts in aud")
	}
	if c.Web.Enabled() && c.Audience == c.Web.ClientID && !c.webAudience {
		// MCP HTTP would then take the web sign-in's ID tokens (and any access
		// token the provider gives the web client) as bearer tokens with the rules' ceiling.
		return fmt.Errorf("auth.oidc.audience %q is auth.oidc.web.client_id too: MCP HTTP would accept the web view's ID tokens as bearer tokens; give MCP its own audience (its resource or API's client id)", c.Audience)
	}
	if c.Resource != "" {
		if err := checkIssuer(c.Resource); err != nil {
			return fmt.Errorf("auth.oidc.resource: %w", err)
		}
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = defaultAlgorithms
	}
	for _, a := range c.Algorithms {
		if !allowedAlgorithms[a] {
			return fmt.Errorf("auth.oidc.algorithms: %q is not allowed; allowed: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA", a)
		}
	}
	switch {
	case c.ClockSkew == 0:
		c.ClockSkew = 30 * time.Second
	case c.ClockSkew < 0 || c.ClockSkew > maxClockSkew:
		return fmt.Errorf("auth.oidc.clock_skew %s: want between 0 and %s", c.ClockSkew, maxClockSkew)
	}
	c.GroupsClaim = cmp.Or(c.GroupsClaim, "groups")
	if len(c.Rules) == 0 {
		return errors.New("auth.oidc.rules is empty: with no rule every token gets nothing; add e.g. {group: platform, ceiling: orchestrate, web: operator}")
	}
	for i, r := range c.Rules {
		if err := r.check(); err != nil {
			return fmt.Errorf("auth.oidc.rules[%d]: %w", i, err)
		}
	}
	if err := c.Web.check(); err != nil {
		return err
	}
	prefixes, err := c.prefixes()
	if err != nil {
		return err
	}
	if err := (egress.Policy{AllowPrivate: prefixes}).Validate(); err != nil {
		return fmt.Errorf("auth.oidc.allow_private: %w", err)
	}
	return nil
}

func (r Rule) check() error {
	if (r.Group == "") == (r.Subject == "") {
		return errors.New("give exactly one of group or subject")
	}
	if r.Ceiling == "" && r.Web == "" {
		return errors.New("grants nothing: give ceiling (read, dispatch, orchestrate) or web (viewer, operator)")
	}
	if r.Ceiling != "" && rank(ceilings, r.Ceiling) == 0 {
		return fmt.Errorf("ceiling %q: want read, dispatch or orchestrate", r.Ceiling)
	}
	if r.Web != "" && rank(webRoles, r.Web) == 0 {
		return fmt.Errorf("web %q: want viewer or operator", r.Web)
	}
	return nil
}

// rank is 1 + the index of s in order, 0 when absent.
func rank(order []string, s string) int {
	for i, o := range order {
		if o == s {
			return i + 1
		}
	}
	return 0
}

func checkIssuer(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q is not an absolute URL without query, fragment or user", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && ip.IsLoopback() {
			return nil
		}
		return fmt.Errorf("%q: http is allowed only to a loopback address; use https", s)
	}
	return fmt.Errorf("%q: want an https URL", s)
}

func (c Config) prefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range c.AllowPrivate {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("auth.oidc.allow_private: want an address or CIDR prefix, got %q", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Grant is what a token's claims earn under the rules: the highest ceiling and web role of
// every rule that matched. The zero Grant allows nothing.
type Grant struct {
	Ceiling string // "" or read, dispatch, orchestrate
	Web     string // "" or viewer, operator
}

// grant applies the rules to a subject and its groups.
func (c Config) grant(subject string, groups []string) Grant {
	var g Grant
	for _, r := range c.Rules {
		match := r.Subject != "" && r.Subject == subject || r.Group != "" && slices.Contains(groups, r.Group)
		if !match {
			continue
		}
		if rank(ceilings, r.Ceiling) > rank(ceilings, g.Ceiling) {
			g.Ceiling = r.Ceiling
		}
		if rank(webRoles, r.Web) > rank(webRoles, g.Web) {
			g.Web = r.Web
		}
	}
	return g
}

// Actor is how an operator from issuer with subject is named in the audit log.
func Actor(issuer, subject string) string {
	return "oidc:" + strings.TrimSuffix(issuer, "/") + "#" + subject
}
