package openairt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultMaxTurns is the turn budget when [Config.MaxTurns] is 0.
const DefaultMaxTurns = 50

// maxToolResultBytes bounds a tool result fed back to the model; the rest is cut with a note.
const maxToolResultBytes = 1 << 20

// Stop reasons reported in [Result.Stopped].
const (
	StoppedMaxTurns  = "max_turns"
	StoppedMaxTokens = "max_tokens"
	StoppedWallTime  = "wall_time"
)

// ToolSpec describes one tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments; it MUST be a JSON object. Empty means
	// a tool without arguments.
	Parameters json.RawMessage
}

// Tools is what the loop may call: a toolreg View satisfies it. The loop offers the model
// List() and hands every call the model makes to Call, including calls naming a tool not in
// List() (the implementation refuses and audits them). Call MUST be safe to call with any
// name and any JSON arguments.
type Tools interface {
	List() []ToolSpec
	// Call runs one tool and returns the text the model reads. An error goes back to the
	// model as the result "error: <message>" and the loop continues, except an error that
	// implements interface{ NeedsInput() string } (found with errors.As): it ends the loop
	// with Result.NeedsInput set to the question.
	Call(ctx context.Context, name string, args json.RawMessage) (string, error)
}

// Config configures one loop.
type Config struct {
	// BaseURL is the API root, e.g. http://gateway/model/v1; requests go to
	// BaseURL + "/chat/completions". Required, http or https.
	BaseURL string
	// Model is the model name sent with every request. Required.
	Model string
	// SystemPrompt opens the conversation; empty sends no system message.
	SystemPrompt string
	// Client sends the requests; inside the sandbox it dials the gateway's Unix socket.
	// Required: the loop never falls back to a default client.
	Client *http.Client
	// Stream asks for a streamed reply (stream: true, with usage in the last chunk).
	Stream bool
	// MaxTurns bounds the model requests; 0 means [DefaultMaxTurns].
	MaxTurns int
	// MaxTokens bounds prompt plus completion tokens over the loop, as the server reports
	// them in usage (a reply without usage counts nothing); 0 means unlimited.
	MaxTokens int64
	// WallTime bounds the whole loop, tool calls included; 0 means unlimited.
	WallTime time.Duration
	// Transcript receives the JSON Lines transcript; nil discards it. The caller redacts.
	Transcript io.Writer
	// APIKey, when set, is sent as a bearer token. Only for tests outside the sandbox: inside
	// it, the gateway adds the key and this MUST stay empty.
	APIKey string

	backoff backoff // nil: defaultBackoff; tests shorten it
}

// Result reports how a loop ended.
type Result struct {
	// Final is the model's last answer when it finished on its own.
	Final string
	// Turns is the number of model replies received.
	Turns int
	// PromptTokens and CompletionTokens add up the usage the server reported.
	PromptTokens, CompletionTokens int64
	// NeedsInput is the question when a tool asked a person for input.
	NeedsInput string
	// Stopped names the budget that ended the loop: "", [StoppedMaxTurns],
	// [StoppedMaxTokens] or [StoppedWallTime].
	Stopped string
}

// needsInput is the error a tool returns to end the loop with a question.
type needsInput interface{ NeedsInput() string }

func (c Config) validate() error {
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "":
		return errors.New("run openai loop: no base URL")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("run openai loop: base URL is not an http or https URL")
	case c.Model == "":
		return errors.New("run openai loop: no model")
	case c.Client == nil:
		return errors.New("run openai loop: no HTTP client")
	case c.MaxTurns < 0:
		return fmt.Errorf("run openai loop: max turns %d is negative", c.MaxTurns)
	case c.MaxTokens < 0:
		return fmt.Errorf("run openai loop: max tokens %d is negative", c.MaxTokens)
	case c.WallTime < 0:
		return fmt.Errorf("run openai loop: wall time %s is negative", c.WallTime)
	}
	return nil
}

// Run runs the tool loop for userPrompt until the model answers without calling a tool, a tool
// asks for input, or a budget is spent. A spent budget is not an error: it returns the Result
// with Stopped set. Errors are for a bad Config, an unusable reply, an HTTP failure after
// retries ([HTTPError]), a transcript write failure, and ctx being done (the Result then holds
// what happened so far). The model's tool calls run one at a time, in order.
func Run(ctx context.Context, cfg Config, tools Tools, userPrompt string) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	var specs []ToolSpec
	if tools != nil {
		specs = tools.List()
	}
	defs, offered, err := toolDefs(specs)
	if err != nil {
		return Result{}, err
	}
	l := &loop{
		cfg:     cfg,
		tools:   tools,
		defs:    defs,
		offered: offered,
		tr:      &transcript{w: cfg.Transcript, now: time.Now},
	}
	l.client = &client{
		http:    cfg.Client,
		url:     strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions",
		apiKey:  cfg.APIKey,
		backoff: cfg.backoff,
		onRetry: func(status int, wait time.Duration) {
			l.tr.write(event{Type: "retry", Turn: l.res.Turns + 1, Status: status, WaitMS: wait.Milliseconds()})
		},
	}
	if l.client.backoff == nil {
		l.client.backoff = defaultBackoff
	}
	wctx := ctx
	if cfg.WallTime > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, cfg.WallTime)
		defer cancel()
	}
	err = l.run(ctx, wctx, userPrompt)
	if err != nil {
		l.tr.write(event{Type: "error", Error: err.Error()})
	}
	if err == nil && l.tr.err != nil {
		err = l.tr.err
	}
	return l.res, err
}

// toolDefs turns specs into the request's tools and the set of offered names.
func toolDefs(specs []ToolSpec) ([]toolDef, map[string]bool, error) {
	defs := make([]toolDef, 0, len(specs))
	offered := make(map[string]bool, len(specs))
	for _, s := range specs {
		params := s.Parameters
		if len(strings.TrimSpace(string(params))) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !objectArgs(params) {
			return nil, nil, fmt.Errorf("run openai loop: tool %q: parameters are not a JSON object", s.Name)
		}
		if s.Name == "" {
			return nil, nil, errors.New("run openai loop: a tool has no name")
		}
		defs = append(defs, toolDef{Type: "function", Function: functionDef{Name: s.Name, Description: s.Description, Parameters: params}})
		offered[s.Name] = true
	}
	return defs, offered, nil
}
