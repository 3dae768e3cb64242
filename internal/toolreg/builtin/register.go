package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agora-dev/agora/internal/toolreg"
)

// FetchFunc performs one HTTP request on behalf of http_fetch. The worker wires it to the
// host-side gateway, which dials through the egress dialer; the tool has already checked the
// scheme and that the host is granted. body is the response body, which FetchFunc SHOULD cap.
type FetchFunc func(ctx context.Context, rawURL, method string) (status int, contentType string, body []byte, err error)

// Env is what the built-in tools act on.
type Env struct {
	// Workspace is the absolute path of the directory the file tools are confined to and
	// run_command runs in. It MUST exist.
	Workspace string
	// CommandEnv is the whole environment of run_command, as KEY=VALUE strings; nothing is
	// inherited from the worker. Its PATH is the only one used to find programs.
	CommandEnv []string
	// Fetch performs http_fetch requests; nil makes every fetch fail.
	Fetch FetchFunc
	// LearnWrites, in a learn dispatch only, makes write_file record a write outside the
	// workspace and make it in a scratch directory instead of refusing it; nil refuses it.
	LearnWrites *LearnWrites
}

// Register adds the built-in tools to r.
func Register(r *toolreg.Registry, env Env) error {
	if env.Workspace == "" || !filepath.IsAbs(env.Workspace) {
		return errors.New("register built-in tools: the workspace must be an absolute path")
	}
	env.CommandEnv = append([]string(nil), env.CommandEnv...)
	if l := env.LearnWrites; l != nil && (l.Scratch == nil || l.Record == nil) {
		return errors.New("register built-in tools: learn writes need a scratch directory and a recorder")
	}
	ws := workspace{dir: filepath.Clean(env.Workspace)}
	tools := []toolreg.Tool{
		readFileTool(ws),
		writeFileTool(ws, env.LearnWrites),
		listFilesTool(ws),
		searchFilesTool(ws),
		runCommandTool(env),
		httpFetchTool(env.Fetch),
		askHumanTool(),
	}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return fmt.Errorf("register built-in tools: %w", err)
		}
	}
	return nil
}

// maxQuestionLen caps an ask_human question, in characters.
const maxQuestionLen = 4000

func askHumanTool() toolreg.Tool {
	return toolreg.Tool{
		Name: "ask_human",
		Description: "Ask the person who dispatched this task a question and stop until they answer. " +
			"Use it only when you cannot go on without a decision or information that only they have.",
		Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"question": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "The question, self-contained."}
			},
			"required": ["question"],
			"additionalProperties": false
		}`),
		ReadOnly: true,
		Handler: func(ctx context.Context, c toolreg.Call) (toolreg.Result, error) {
			var a struct {
				Question string `json:"question"`
			}
			if err := decodeArgs(c.Args, &a); err != nil {
				return toolreg.Result{}, err
			}
			return toolreg.Result{}, &toolreg.NeedsInput{Question: a.Question}
		},
	}
}

// decodeArgs decodes arguments the view has already validated against the tool's schema.
func decodeArgs(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return errors.New("decode arguments: they do not match the schema")
	}
	return nil
}
