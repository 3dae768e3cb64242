package toolreg

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
)

// recorder is an Auditor that keeps every decision.
type recorder struct {
	mu sync.Mutex
	ds []Decision
}

func (r *recorder) ToolCall(ctx context.Context, d Decision) {
	if ctx.Err() != nil {
		panic("auditor handed a cancelled context")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ds = append(r.ds, d)
}

func (r *recorder) all() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Decision(nil), r.ds...)
}

// only returns the single decision recorded, failing when there is not exactly one.
func (r *recorder) only(t testing.TB) Decision {
	t.Helper()
	ds := r.all()
	if len(ds) != 1 {
		t.Fatalf("got %d audit decisions, want 1: %+v", len(ds), ds)
	}
	return ds[0]
}

type nopAuditor struct{}

func (nopAuditor) ToolCall(context.Context, Decision) {}

const testRole = "validator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// echoSchema has one of every supported property kind.
var echoSchema = json.RawMessage(`{
	"type": "object",
	"description": "test",
	"properties": {
		"path":   {"type": "string", "description": "a path", "minLength": 1, "maxLength": 8},
		"mode":   {"type": "string", "enum": ["GET", "HEAD"]},
		"free":   {"type": "string"},
		"n":      {"type": "integer", "minimum": 0, "maximum": 100},
		"big":    {"type": "integer"},
		"x":      {"type": "number"},
		"flag":   {"type": "boolean"},
		"argv":   {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1, "maxItems": 3}
	},
	"required": ["path"],
	"additionalProperties": false
}`)

// tool returns a registrable tool whose handler records that it ran and returns res, err.
func tool(name string, ran *int, res Result, err error) Tool {
	return Tool{
		Name:        name,
		Description: "test tool " + name,
		Schema:      echoSchema,
		Handler: func(ctx context.Context, c Call) (Result, error) {
			if ran != nil {
				*ran++
			}
			return res, err
		},
	}
}

func mustRegister(t testing.TB, r *Registry, tools ...Tool) {
	t.Helper()
	for _, tl := range tools {
		if err := r.Register(tl); err != nil {
			t.Fatalf("Register(%q): %v", tl.Name, err)
		}
	}
}
