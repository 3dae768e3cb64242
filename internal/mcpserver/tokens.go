package mcpserver

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// MinTokenLen is the shortest bearer token the HTTP transport accepts.
const MinTokenLen = 32

// maxTokenLen bounds a token (and so what a verifier hashes).
const maxTokenLen = 512

// AllowAnyValue is the literal AGORA_HTTP_ALLOW_ANY must hold before the HTTP transport binds
// anything but a loopback address.
const AllowAnyValue = "yes-i-understand-the-risk"

// Refusals to start the HTTP transport.
var (
	ErrNoToken     = errors.New("no token, no bind: the HTTP transport needs AGORA_HTTP_TOKEN or AGORA_HTTP_TOKENS_FILE")
	ErrWeakToken   = errors.New("token too weak")
	ErrExposedBind = errors.New("refusing a non-loopback address")
)

// Client is one HTTP client: the name its calls are audited under, its bearer token and its
// ceiling. Its String and Format never show the token.
type Client struct {
	Name    string
	Token   string `json:"-"`
	Ceiling Ceiling
}

func (c Client) String() string { return fmt.Sprintf("%s (ceiling %s)", c.Name, c.Ceiling) }

// Format prints [Client.String] under every verb, so a token cannot reach a log by accident.
func (c Client) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// DefaultClientName names the one client of AGORA_HTTP_TOKEN.
const DefaultClientName = "default"

var clientNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`) })

// clientDoc is one entry of a tokens file.
type clientDoc struct {
	Name    string `yaml:"name"`
	Token   string `yaml:"token"`
	Ceiling string `yaml:"ceiling"`
}

// quoted matches a quoted value in a decoder message: it may be a token, so it is elided.
var quoted = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`") })

// safePath keeps the parts of a decoder path that cannot hold a token: indices and the known
// field names.
func safePath(path string) string {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		name, _, _ := strings.Cut(p, "[")
		switch name {
		case "", "name", "token", "ceiling":
		default:
			parts[i] = "..."
		}
	}
	return strings.Join(parts, ".")
}

// ParseClients parses a tokens file: a YAML (or JSON) list of {name, token, ceiling}, each
// field required. Names are unique, tokens unique and at least [MinTokenLen] printable ASCII
// characters. Errors name the entry and field, never a token.
func ParseClients(file string, src []byte) ([]Client, error) {
	var docs []clientDoc
	if _, err := strictyaml.Decode(file, src, &docs); err != nil {
		var es strictyaml.Errors
		if !errors.As(err, &es) || len(es) == 0 {
			return nil, fmt.Errorf("tokens file %s: not a YAML or JSON list of {name, token, ceiling}", file)
		}
		lines := make([]string, len(es))
		for i, e := range es {
			e.Msg = quoted().ReplaceAllString(e.Msg, `"..."`)
			e.Path = safePath(e.Path)
			lines[i] = e.Error()
		}
		return nil, fmt.Errorf("tokens file %s:\n%s", file, strings.Join(lines, "\n"))
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("tokens file %s lists no clients: %w", file, ErrNoToken)
	}
	clients := make([]Client, 0, len(docs))
	for i, d := range docs {
		where := fmt.Sprintf("tokens file %s: entry %d", file, i+1)
		if !clientNameRE().MatchString(d.Name) {
			return nil, fmt.Errorf("%s: name must be 1-64 lowercase letters, digits, '.', '_' or '-'", where)
		}
		where = fmt.Sprintf("tokens file %s: client %q", file, d.Name)
		if d.Ceiling == "" {
			return nil, fmt.Errorf("%s: ceiling is required (read, dispatch or orchestrate)", where)
		}
		c, err := ParseCeiling(d.Ceiling)
		if err != nil {
			return nil, fmt.Errorf("%s: ceiling must be read, dispatch or orchestrate", where)
		}
		if err := CheckToken(d.Token); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		clients = append(clients, Client{Name: d.Name, Token: d.Token, Ceiling: c})
	}
	if err := checkClients(clients); err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", file, err)
	}
	return clients, nil
}

// CheckToken reports whether token may be used: at least [MinTokenLen] characters of printable
// ASCII without spaces (what an Authorization header can carry intact).
func CheckToken(token string) error {
	if token == "" {
		return fmt.Errorf("token is empty: %w", ErrWeakToken)
	}
	if len(token) < MinTokenLen {
		return fmt.Errorf("token has %d characters, at least %d are required (try: openssl rand -hex 32): %w", len(token), MinTokenLen, ErrWeakToken)
	}
	if len(token) > maxTokenLen {
		return fmt.Errorf("token has %d characters, at most %d are allowed: %w", len(token), maxTokenLen, ErrWeakToken)
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] > '~' {
			return fmt.Errorf("token holds a character that is not printable ASCII: %w", ErrWeakToken)
		}
	}
	return nil
}

// checkClients checks a client set: not empty, every token valid, names and tokens unique.
func checkClients(cs []Client) error {
	if len(cs) == 0 {
		return ErrNoToken
	}
	names := map[string]bool{}
	tokens := map[string]string{}
	for _, c := range cs {
		if err := CheckToken(c.Token); err != nil {
			return fmt.Errorf("client %q: %w", c.Name, err)
		}
		if !c.Ceiling.Allows(CeilingRead) {
			return fmt.Errorf("client %q has no ceiling", c.Name)
		}
		if names[c.Name] {
			return fmt.Errorf("client %q is listed twice", c.Name)
		}
		names[c.Name] = true
		if other, ok := tokens[c.Token]; ok {
			return fmt.Errorf("clients %q and %q share a token; each client needs its own", other, c.Name)
		}
		tokens[c.Token] = c.Name
	}
	return nil
}

// loopbackHosts are the only hosts the HTTP transport binds without [AllowAnyValue].
var loopbackHosts = map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true}

// CheckBind reports whether addr (HOST:PORT) may be bound: a loopback host always, anything
// else only when allowAny (AGORA_HTTP_ALLOW_ANY held [AllowAnyValue]).
func CheckBind(addr string, allowAny bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("http address %q: want HOST:PORT, such as 127.0.0.1:8765", addr)
	}
	if loopbackHosts[host] || allowAny {
		return nil
	}
	shown := cmp.Or(host, "every interface")
	return fmt.Errorf("%w: %s is not 127.0.0.1, ::1 or localhost; exposing the MCP server off this host also needs AGORA_HTTP_ALLOW_ANY=%s (the token alone does not allow it)",
		ErrExposedBind, shown, AllowAnyValue)
}
