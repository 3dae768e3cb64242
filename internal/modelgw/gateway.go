package modelgw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// The audit kinds the gateway writes are in package audit/entry (entry.ToolGateway and
// the rest).

// Defaults and fixed limits.
const (
	// DefaultMaxBody caps an upstream response body when [Config.MaxBody] is zero.
	DefaultMaxBody = 8 << 20
	// DefaultModelTimeout bounds one model request when [Config.ModelTimeout] is zero.
	DefaultModelTimeout = 10 * time.Minute
	// DefaultFetchTimeout bounds one fetch, redirects included, when [Config.FetchTimeout] is zero.
	DefaultFetchTimeout = 60 * time.Second
	// DefaultMaxConcurrent is the number of requests served at once when
	// [Config.MaxConcurrent] is zero.
	DefaultMaxConcurrent = 16
	// DefaultRequestsPerSecond and DefaultRequestBurst shape the request rate when
	// [Config.RequestsPerSecond] and [Config.RequestBurst] are zero.
	DefaultRequestsPerSecond = 10
	DefaultRequestBurst      = 20
	// DefaultMaxAuditEntries and DefaultMaxAuditBytes are the audit budget when
	// [Config.MaxAuditEntries] and [Config.MaxAuditBytes] are zero: about four times what a
	// busy agent writes in a 30-minute dispatch (a model request is one entry, a reported
	// tool call two, or four with Claude Code's before and after hooks).
	DefaultMaxAuditEntries = 8192
	DefaultMaxAuditBytes   = 8 << 20
	// DefaultRefusalInterval is how often counted refusals are written when
	// [Config.RefusalInterval] is zero.
	DefaultRefusalInterval = 5 * time.Second

	// maxRequestBody caps a request body from the sandbox on every route.
	maxRequestBody = 4 << 20
	// closeGrace is how long Close lets in-flight requests finish before cancelling them.
	closeGrace = 10 * time.Second

	// readHeaderTimeout and idleTimeout are short because every open connection holds one of
	// the maxConns slots and costs the supervisor memory (see connlimit.go). The worker sends
	// a request's header at once, and dials again for a request after an idle connection
	// was closed (a client should keep idle connections for less than idleTimeout, so that
	// it is never the gateway that closes one as a request is sent on it).
	readHeaderTimeout = 5 * time.Second
	readTimeout       = time.Minute
	idleTimeout       = 5 * time.Second
	maxHeaderBytes    = 64 << 10
)

// Auditor receives the gateway's audit records. Record MUST NOT block for long and is called
// with a context that is not cancelled when the client goes away. details holds only strings,
// integers and int64s. An error means the record was not kept: a tool decision reported on
// /audit/tool is then answered 503, so the worker fails the call closed; a request record
// cannot change an answer already sent, and its error is dropped.
type Auditor interface {
	Record(ctx context.Context, kind string, details map[string]any) error
}

// Model APIs for [Config.ModelAPI].
const (
	// APIOpenAI serves the OpenAI chat-completions routes under /model/ with the key as
	// "Authorization: Bearer".
	APIOpenAI = runtimes.APIOpenAI
	// APIAnthropic serves the Anthropic Messages routes under /anthropic/ with the key as
	// "x-api-key", for Claude Code.
	APIAnthropic = runtimes.APIAnthropic
)

// Config is one dispatch's gateway. DispatchID, Role, Dialer and Audit are required.
type Config struct {
	// DispatchID and Role ("subagent@sha256:<hex>") name the dispatch in every audit record.
	DispatchID, Role string
	// ModelBaseURL is the model endpoint, e.g. https://api.openai.com/v1 (OpenAI) or
	// https://api.anthropic.com (Anthropic); "" means there is no model route. It must be
	// http or https with no userinfo, query or fragment.
	ModelBaseURL string
	// ModelAPI is the wire format of ModelBaseURL: [APIOpenAI] (the default when empty) or
	// [APIAnthropic]. Only that API's routes are served.
	ModelAPI string
	// Model is the subagent's model: every model request (chat completions, Responses,
	// Anthropic Messages and its token count) must name exactly it, or it is refused before
	// it is sent (modelpin.go). "" pins nothing (a subagent that names no model, whose CLI
	// picks its own; such a subagent cannot have a usd budget).
	Model string
	// APIKey is sent on model requests only, as "Authorization: Bearer <key>" (OpenAI) or
	// "x-api-key: <key>" (Anthropic); nil or empty sends none. It must be at least [redact.MinLen] bytes (shorter could not be masked in
	// responses) and a valid header value. Listen copies it; Close zeroes the copy.
	APIKey []byte
	// Secrets are the dispatch's other secret values (its env bundles'). They are never sent
	// anywhere; they are masked like the key in every audit field and every response, since
	// anything in the sandbox can put them into a request (a tool.call reason, a fetched URL).
	Secrets [][]byte
	// Egress lists the hosts /fetch may reach: an exact lowercase host name or canonical IP
	// literal, or "*.domain" for any proper subdomain of domain. Empty grants none.
	Egress []grant.EgressRule
	// Dialer carries every outbound request; its policy decides private addresses.
	Dialer *egress.Dialer
	// Audit records the gateway's entries (see the package doc), each charged to the audit
	// budget (MaxAuditEntries, MaxAuditBytes) first.
	Audit Auditor
	// MaxBody caps an upstream response body in bytes; zero means [DefaultMaxBody].
	MaxBody int64
	// ModelTimeout bounds one model request, streaming included; zero means
	// [DefaultModelTimeout].
	ModelTimeout time.Duration
	// FetchTimeout bounds one fetch, redirects included; zero means [DefaultFetchTimeout].
	FetchTimeout time.Duration
	// MaxConcurrent is how many requests are served at once; more are refused with 503.
	// Zero means [DefaultMaxConcurrent].
	MaxConcurrent int
	// RequestsPerSecond and RequestBurst bound the request rate (a token bucket); requests
	// over it are refused with 429. Zero means [DefaultRequestsPerSecond] and
	// [DefaultRequestBurst].
	RequestsPerSecond float64
	RequestBurst      int
	// MaxAuditEntries and MaxAuditBytes are the dispatch's audit budget: the most entries,
	// and bytes of entries (the kind and the details as JSON), the gateway writes, every
	// kind counted, the worker's tool.call reports included, the final entry too. When an
	// entry would not fit, the gateway writes one [entry.ToolGatewayBudget] entry instead, calls
	// OnLimit, and from then on refuses every request (503) without an entry. Zero means
	// [DefaultMaxAuditEntries] and [DefaultMaxAuditBytes].
	MaxAuditEntries int
	MaxAuditBytes   int64
	// OnLimit is called once, with a detail for the dispatch's record, when the audit budget
	// is spent; the dispatch supervisor stops the sandbox and fails the dispatch
	// limit-exceeded. It MUST NOT block. Nil calls nothing (the gateway still refuses).
	OnLimit func(detail string)
	// Meter counts the dispatch's model usage against its budget: every model call's response
	// is read for its usage, and once the budget is spent the next model call is refused
	// (400, an error body in the API's own shape) and OnBudget is called. Nil counts usage
	// against no budget ([Gateway.Usage] still reports it).
	Meter *budget.Meter
	// OnBudget is called, after the refusal is answered, each time a model call is refused
	// because the budget is spent, with why. It MUST NOT block. Nil calls nothing.
	OnBudget func(detail string)
	// Approver holds the calls the worker reports on /approval until a person decides them
	// (see approval.go). Nil: the dispatch holds no calls, and /approval is refused.
	Approver Approver
	// Approve are the approve rules of the dispatch's grant. A call reported on /approval is
	// held only when one of them holds it, and under the rule the gateway finds
	// ([grant.ApprovalTool], [grant.NeedsApproval], [grant.HeldCommandLine]), never under
	// the text of the request: anything in the sandbox can POST /approval.
	Approve []grant.ApproveRule
	// ApprovalTimeout is the longest an Approver holds a call; the server's write timeout
	// allows for it. Zero when Approver is nil.
	ApprovalTimeout time.Duration
	// RefusalInterval is how often counted refusals are written as [entry.ToolGatewayRefused];
	// Close writes what is left. Zero means [DefaultRefusalInterval].
	RefusalInterval time.Duration
	// Tracer receives a span for every model call and every tool decision (trace.go); nil
	// records none.
	Tracer Tracer
	// Learn: the dispatch is a learn dispatch (docs/learn.md), the host's decision. Only then
	// is a would_deny report on /audit/tool recorded (entry.ToolWouldDeny); otherwise it is
	// refused unrecorded.
	Learn bool
	// LearnHosts are egress.learn_hosts (host and port; docs/learn.md): with Learn, a fetch to
	// a host the grant refuses but one of these admits is recorded as net.would_deny and sent.
	LearnHosts []grant.EgressRule
}

// Gateway is a running gateway. Build it with [Listen]; stop it with [Gateway.Close].
type Gateway struct {
	dispatchID, role string
	learn            bool        // Config.Learn
	worker           workerClaim // the worker's key (workerkey.go)
	learnHosts       []grant.EgressRule
	key              []byte // zeroed by Close
	red              *redact.Redactor
	model            *url.URL // nil: no model route
	api              string   // APIOpenAI or APIAnthropic
	pin              string   // the model every model request must name; "" pins none
	grants           grants
	dialer           *egress.Dialer
	audit            *auditBudget // every entry goes through the budget
	tally            tally
	meter            *budget.Meter
	onBudget         func(detail string)
	calls            callStates // what is on record of each reported call id
	approver         Approver
	approve          []grant.ApproveRule // the grant's approve rules
	tracer           *spans              // nil without a Tracer
	refusalInterval  time.Duration
	maxBody          int64
	modelClient      *http.Client
	fetchClient      *http.Client
	slots            chan struct{}
	limiter          *rate.Limiter

	path       string
	sock       os.FileInfo // the socket file Listen created, to remove only that one
	srv        *http.Server
	serveDone  chan struct{}
	cancelBase context.CancelFunc
	stopWatch  func() bool
	closeGrace time.Duration
	stopFlush  chan struct{} // closed by Close to end flushLoop
	flushDone  chan struct{} // closed when flushLoop has returned

	mu      sync.Mutex // guards closing and orders inflight.Add before inflight.Wait
	closing bool
	// inflight counts handlers running; Add happens under mu while !closing.
	inflight sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Listen validates cfg, creates the Unix socket at socketPath (mode 0600; a stale socket left
// there is replaced, a live one or any other file is refused) and starts serving. Cancelling
// ctx closes the gateway as [Gateway.Close] does.
func Listen(ctx context.Context, socketPath string, cfg Config) (*Gateway, error) {
	g, err := newGateway(cfg)
	if err != nil {
		return nil, err
	}
	ln, fi, err := listenUnix(socketPath)
	if err != nil {
		return nil, err
	}
	g.path, g.sock = socketPath, fi
	approvalTimeout := cfg.ApprovalTimeout
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.cancelBase = cancel
	g.srv = &http.Server{
		Handler:           http.HandlerFunc(g.serve),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		// A response may stream for as long as the longest upstream request.
		// A held call's answer waits for a person, as long as the approval timeout.
		WriteTimeout:   max(g.modelClient.Timeout, g.fetchClient.Timeout, approvalTimeout) + time.Minute,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		BaseContext:    func(net.Listener) context.Context { return base },
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	g.serveDone = make(chan struct{})
	go func() {
		defer close(g.serveDone)
		g.srv.Serve(newLimitListener(ln, maxConns)) // returns http.ErrServerClosed once Close starts
	}()
	g.stopFlush, g.flushDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(g.flushDone)
		g.flushLoop(context.WithoutCancel(ctx), g.refusalInterval, g.stopFlush)
	}()
	g.stopWatch = context.AfterFunc(ctx, func() { g.Close() })
	return g, nil
}

// newGateway validates cfg and builds everything but the socket and the server.
func newGateway(cfg Config) (*Gateway, error) {
	switch {
	case cfg.Dialer == nil:
		return nil, errors.New("gateway config: no dialer")
	case cfg.Audit == nil:
		return nil, errors.New("gateway config: no auditor")
	}
	if err := checkID(cfg.DispatchID); err != nil {
		return nil, fmt.Errorf("gateway config: dispatch id: %s", err)
	}
	if err := checkRole(cfg.Role); err != nil {
		return nil, fmt.Errorf("gateway config: role: %s", err)
	}
	switch cfg.ModelAPI {
	case "":
		cfg.ModelAPI = APIOpenAI
	case APIOpenAI, APIAnthropic:
	default:
		return nil, fmt.Errorf("gateway config: model API %q: want %q or %q", clip(cfg.ModelAPI, 32), APIOpenAI, APIAnthropic)
	}
	if len(cfg.APIKey) > 0 {
		if err := checkKey(cfg.APIKey); err != nil {
			return nil, fmt.Errorf("gateway config: api key: %s", err)
		}
	}
	gs, err := newGrants(cfg.Egress)
	if err != nil {
		return nil, err
	}
	var learnHosts grants
	if cfg.Learn && len(cfg.LearnHosts) > 0 {
		if learnHosts, err = newGrants(cfg.LearnHosts); err != nil {
			return nil, fmt.Errorf("learn hosts: %w", err)
		}
	}
	g := &Gateway{
		dispatchID: cfg.DispatchID,
		learn:      cfg.Learn,
		learnHosts: learnHosts,
		role:       cfg.Role,
		tracer:     newSpans(cfg.Tracer),
		api:        cfg.ModelAPI,
		pin:        cfg.Model,
		key:        append([]byte(nil), cfg.APIKey...),
		grants:     gs,
		dialer:     cfg.Dialer,
		audit: &auditBudget{
			inner: cfg.Audit, dispatchID: cfg.DispatchID, role: cfg.Role,
			maxEntries: int64(orDefault(cfg.MaxAuditEntries, DefaultMaxAuditEntries)),
			maxBytes:   orDefault(cfg.MaxAuditBytes, DefaultMaxAuditBytes),
			onLimit:    cfg.OnLimit,
		},
		refusalInterval: orDefault(cfg.RefusalInterval, DefaultRefusalInterval),
		maxBody:         orDefault(cfg.MaxBody, DefaultMaxBody),
		slots:           make(chan struct{}, orDefault(cfg.MaxConcurrent, DefaultMaxConcurrent)),
		limiter: rate.NewLimiter(rate.Limit(orDefault(cfg.RequestsPerSecond, DefaultRequestsPerSecond)),
			orDefault(cfg.RequestBurst, DefaultRequestBurst)),
		closeGrace: closeGrace,
		meter:      cfg.Meter,
		onBudget:   cfg.OnBudget,
		approver:   cfg.Approver,
		approve:    slices.Clone(cfg.Approve),
	}
	if g.meter == nil {
		g.meter = budget.NewMeter(budget.Budget{}, nil, "")
	}
	g.red = redact.New(append([][]byte{g.key}, cfg.Secrets...))
	if cfg.ModelBaseURL != "" {
		if g.model, err = parseModelURL(cfg.Dialer, cfg.ModelBaseURL); err != nil {
			return nil, err
		}
	}
	g.modelClient = cfg.Dialer.Client(orDefault(cfg.ModelTimeout, DefaultModelTimeout))
	// The key would follow a redirect; the sandbox gets the 3xx instead.
	g.modelClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	g.fetchClient = cfg.Dialer.Client(orDefault(cfg.FetchTimeout, DefaultFetchTimeout))
	vet := g.fetchClient.CheckRedirect
	g.fetchClient.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := g.vetTarget(req.Context(), req.URL, req.Method); err != nil {
			return err
		}
		return vet(req, via)
	}
	return g, nil
}

// parseModelURL checks the model base URL and returns it without a trailing slash.
func parseModelURL(d *egress.Dialer, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("gateway config: model base URL does not parse")
	}
	switch {
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("gateway config: model base URL has a query or fragment")
	case u.User != nil:
		return nil, errors.New("gateway config: model base URL has userinfo (the gateway sends the key itself)")
	}
	if err := d.CheckURL(u); err != nil {
		return nil, fmt.Errorf("gateway config: model base URL: %s", describe(err))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Close stops accepting requests, lets in-flight ones finish for up to 10 seconds, then
// cancels the rest and waits for them, writes the refusals counted since the last interval,
// removes the socket and zeroes its copy of the API key. Nothing is recorded after Close
// returns. It is safe to call more than once; later calls return the first result.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() { g.closeErr = g.close() })
	return g.closeErr
}

func (g *Gateway) close() error {
	g.stopWatch()
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), g.closeGrace)
	err := g.srv.Shutdown(ctx)
	cancel()
	g.cancelBase() // cancels the upstream requests of handlers still running
	if err != nil {
		g.srv.Close()
	}
	g.inflight.Wait()
	<-g.serveDone
	close(g.stopFlush)
	<-g.flushDone
	g.flushRefusals(context.Background(), true)
	g.modelClient.CloseIdleConnections()
	g.fetchClient.CloseIdleConnections()
	clear(g.key)
	return removeSocket(g.path, g.sock)
}

func orDefault[T int | int64 | float64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
