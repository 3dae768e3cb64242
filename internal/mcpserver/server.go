package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// Config is everything the server is handed. It gets no store, key or writer.
type Config struct {
	Catalog    Catalog    // required
	Dispatcher Dispatcher // required
	// Orchestrator is nil while no orchestrator service runs; its three tools then answer
	// [ErrOrchestratorDown].
	Orchestrator Orchestrator
	Audit        AuditFunc // required
	Logger       *slog.Logger
	Version      string // reported to clients as the server's version
}

// Limits bound what one client may ask for. Zero fields take the defaults.
type Limits struct {
	Rate        float64 // tool calls (stdio) or HTTP requests per second; default [DefaultRate]
	Burst       int     // default [DefaultBurst]
	MaxInFlight int     // concurrent HTTP requests per client; default [DefaultMaxInFlight]
}

// Defaults of [Limits].
const (
	DefaultRate        = 20
	DefaultBurst       = 40
	DefaultMaxInFlight = 16
)

func (l Limits) withDefaults() Limits {
	if l.Rate <= 0 {
		l.Rate = DefaultRate
	}
	if l.Burst <= 0 {
		l.Burst = DefaultBurst
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	return l
}

// Server serves the eleven tools over stdio or HTTP. It is safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger
	// redactor masks the HTTP tokens in everything the server says; set once before serving.
	redactor *redact.Redactor
	// resultCache keeps what terminal dispatches produced, read once.
	resultCache *resultCache
	// feeds are the shared polls of the dispatches callers wait on (follow.go).
	feeds *feeds
}

// ErrConfig reports a [Config] that lacks a required port.
var ErrConfig = errors.New("mcp server config incomplete")

// New returns a server over cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Catalog == nil || cfg.Dispatcher == nil || cfg.Audit == nil {
		return nil, ErrConfig
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Version = cmp.Or(cfg.Version, "dev")
	return &Server{cfg: cfg, log: cfg.Logger, redactor: redact.New(nil), resultCache: &resultCache{}, feeds: &feeds{}}, nil
}

// identity says who sent a request, from what the transport attached to it (the token over
// HTTP) or what the session started with (the command line and the client's name over stdio).
type identity func(req mcp.Request) (Principal, bool)

// newMCP builds an SDK server carrying the eleven tools for callers identified by id. limiter,
// when not nil, rate-limits tool calls (stdio has no HTTP layer to do it).
func (s *Server) newMCP(id identity, limiter *rate.Limiter) *mcp.Server {
	m := mcp.NewServer(&mcp.Implementation{Name: "agora", Title: "agora", Version: s.cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       s.sdkLog(),
		HasTools:     true,
		// tools/list depends on the caller's ceiling: no one else may cache it.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.CacheScope = "private"
			c.TTLMs = 0
		},
	})
	published := make(map[string]*mcp.Tool, len(tools()))
	for _, t := range tools() {
		published[t.name] = t.mcpTool()
		m.AddTool(t.served(), s.guard(t, id, limiter))
	}
	s.addResources(m, id)
	m.AddReceivingMiddleware(s.toolMiddleware(id, published))
	return m
}

// toolMiddleware shows a caller only the tools its ceiling allows (a view: every call is checked
// again by [Server.guard]), each as published (its whole input schema, where the SDK server
// holds the tool as [tool.served]), and audits calls to tools that do not exist, such as an
// attempt at a privileged verb, before the SDK refuses them.
func (s *Server) toolMiddleware(id identity, published map[string]*mcp.Tool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
					if _, known := tierOf(p.Name); !known {
						s.auditUnknown(ctx, id, req, p)
					}
				}
			}
			res, err := next(ctx, method, req)
			lr, ok := res.(*mcp.ListToolsResult)
			if err != nil || method != "tools/list" || !ok {
				return res, err
			}
			p, known := id(req)
			out := *lr
			out.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(t *mcp.Tool) bool {
				tier, ok := tierOf(t.Name)
				return !known || !ok || !p.Ceiling.Allows(tier)
			})
			for i, t := range out.Tools {
				if pt, ok := published[t.Name]; ok {
					out.Tools[i] = pt
				}
			}
			s.listWorkspaces(ctx, out.Tools)
			return &out, nil
		}
	}
}

// toolNameRE is what a tool name may look like (the spec's SHOULD); anything else is not
// repeated into the audit log.
var toolNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`) })

// auditUnknown records a call to a tool that does not exist as a denial.
func (s *Server) auditUnknown(ctx context.Context, id identity, req mcp.Request, params *mcp.CallToolParamsRaw) {
	p, ok := id(req)
	if !ok {
		p = Principal{Client: "unidentified"}
	}
	name := params.Name
	if !toolNameRE().MatchString(name) {
		name = "(not a tool name)"
	}
	s.audit(ctx, p, tool{name: name}, entry.MCPToolDenied, decisionUnknown, params.Arguments)
	s.log.Warn("call to an unknown tool", "tool", name, "client", p.Client)
}

// StdioConfig is who the stdio client is and its limits. Principal.Ceiling is the client's
// ceiling. Its name is Principal.Client when set (agora's --actor); otherwise it is
// CLIENT@Owner, CLIENT being the name the client gave in initialize (see [stdioName]) and
// Owner the OS user who started the server: the name a client gives itself is recorded, never
// trusted (the ceiling, fixed here, is what authorises), and the user stays on the record.
type StdioConfig struct {
	Principal Principal
	Owner     string
	Limits    Limits
}

// maxStdioLine caps one inbound frame on stdio.
const maxStdioLine = 4 << 20

// ServeStdio serves one client on in and out (the process's stdin and stdout) until the client
// disconnects or ctx ends. Nothing but MCP frames is written to out.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, cfg StdioConfig) error {
	if !cfg.Principal.Ceiling.Allows(CeilingRead) {
		return errors.New("serve mcp: the stdio client has no ceiling")
	}
	if cfg.Principal.Client == "" && cfg.Owner == "" {
		return errors.New("serve mcp: the stdio client has neither a name nor an owner")
	}
	l := cfg.Limits.withDefaults()
	id := func(req mcp.Request) (Principal, bool) {
		p := cfg.Principal
		if p.Client == "" {
			p.Client = stdioName(req.GetSession()) + "@" + cfg.Owner
		}
		return p, true
	}
	m := s.newMCP(id, rate.NewLimiter(rate.Limit(l.Rate), l.Burst))
	s.log.Info("mcp server serving stdio", "client", cfg.Principal.Client, "owner", cfg.Owner, "ceiling", cfg.Principal.Ceiling.String())
	t := &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}, MaxLineLength: maxStdioLine}
	return m.Run(ctx, t)
}

// sdkLog is the logger handed to the SDK: warnings and errors only, its per-session chatter
// stays out of the operator's log.
func (s *Server) sdkLog() *slog.Logger {
	return slog.New(minLevel{Handler: s.log.Handler(), min: slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
