package plan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// The wire types mirror the document. Pointers tell a field written as zero (an error: a
// concurrency of 0, a timeout of 0s) from one left out (the default).
type planDoc struct {
	Version     *int           `yaml:"version"`
	Name        string         `yaml:"name"`
	Concurrency *int           `yaml:"concurrency"`
	Defaults    defaultsDoc    `yaml:"defaults"`
	Workspace   string         `yaml:"workspace"`
	Revision    string         `yaml:"revision"`
	Queue       string         `yaml:"queue"`
	Tasks       []*taskDoc     `yaml:"tasks"` // nil: written as null; validate drops each it no longer needs
	Budget      *budget.Budget `yaml:"budget"`
}

type defaultsDoc struct {
	Target  string         `yaml:"target"`
	Env     []string       `yaml:"env"`
	Timeout *time.Duration `yaml:"timeout"`
	Retry   *retryDoc      `yaml:"retry"`
	Verify  *verifyDoc     `yaml:"verify"`
}

type taskDoc struct {
	ID        string             `yaml:"id"`
	Subagent  string             `yaml:"subagent"`
	Target    string             `yaml:"target"`
	Env       []string           `yaml:"env"`
	Input     any                `yaml:"input"`
	DependsOn []string           `yaml:"depends_on"`
	Base      []string           `yaml:"base"`
	Needs     map[string]needDoc `yaml:"needs"`
	Locks     []lockDoc          `yaml:"locks"`
	Retry     *retryDoc          `yaml:"retry"`
	Timeout   *time.Duration     `yaml:"timeout"`
	Grants    *grant.Set         `yaml:"grants"`
	Budget    *budget.Budget     `yaml:"budget"`
	Verify    *verifyDoc         `yaml:"verify"`
	FanOut    *fanOutDoc         `yaml:"fan_out"`
	Review    *reviewDoc         `yaml:"review"`
	OnFail    *onFailDoc         `yaml:"on_fail"`
	Learn     *bool              `yaml:"learn"`
}

// verifyDoc is a verify gate: an argv (never a shell line), a timeout, protect globs, the
// changes globs (what the work may touch) and the evidence expected.
type verifyDoc struct {
	Command []string       `yaml:"command"`
	Timeout *time.Duration `yaml:"timeout"`
	Protect []string       `yaml:"protect"`
	Changes []string       `yaml:"changes"`
	Expect  *expectDoc     `yaml:"expect"`
}

// expectDoc is a gate's evidence: the JUnit report's file name in $AGORA_REPORT and the
// fewest tests that must have run.
type expectDoc struct {
	JUnit    string `yaml:"junit"`
	MinTests *int   `yaml:"min_tests"`
}

type needDoc struct {
	From   string `yaml:"from"`
	Select string `yaml:"select"`
}

type retryDoc struct {
	MaxAttempts    *int           `yaml:"max_attempts"`
	InitialBackoff *time.Duration `yaml:"initial_backoff"`
	Multiplier     *float64       `yaml:"multiplier"`
	MaxBackoff     *time.Duration `yaml:"max_backoff"`
	OnWorkerFailed *bool          `yaml:"on_worker_failed"`
}

// Parse decodes a plan from src (YAML or JSON; file names it in messages) and validates its
// structure: fields, names, references between tasks, cycles, locks, retry and limits. Every
// problem is reported at once as [strictyaml.Errors], each located by file, line and path
// (tasks[3].depends_on[0]: unknown task "lint"), in document order. Catalog references are
// not looked up; see [Validate].
func Parse(file string, src []byte) (*Plan, error) {
	return Validate(context.Background(), file, src, nil)
}

// Validate is [Parse] that also looks up every catalog reference through refs (nil: none),
// and reports the structural and the catalog problems together, so whoever wrote the plan
// (a person or a model) fixes them in one pass. A reference at a path that already has a
// structural problem is not looked up.
//
// An empty file is a plan given as a value, not read from a file (an MCP client sends one as
// a JSON object): its problems are placed by path alone ("plan: tasks[3].depends_on[0]:
// ..."), since a line number would count the lines of the bytes agora was handed after the
// client's own encoding, which nobody wrote.
func Validate(ctx context.Context, file string, src []byte, refs Refs) (*Plan, error) {
	p, err := validate(ctx, file, src, refs)
	if err != nil && file == "" {
		return nil, unplaced(err)
	}
	return p, err
}

// unplaced is err with every problem named "plan" and placed by path only.
func unplaced(err error) error {
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		return err
	}
	out := make(strictyaml.Errors, len(es))
	for i, e := range es {
		e.File, e.Line = "plan", 0
		out[i] = e
	}
	return out
}

func validate(ctx context.Context, file string, src []byte, refs Refs) (*Plan, error) {
	return validateWith(ctx, file, src, refs, strictyaml.Decode)
}

// validateWith is validate decoding through decode (tests hold strictyaml's JSON fast path
// to its YAML path through it).
func validateWith(ctx context.Context, file string, src []byte, refs Refs, decode func(string, []byte, any) (*strictyaml.Positions, error)) (*Plan, error) {
	if len(src) > MaxSourceSize {
		return nil, strictyaml.Errors{{File: file, Msg: fmt.Sprintf("plan is %d bytes; at most %d", len(src), MaxSourceSize)}}
	}
	var doc planDoc
	pos, err := decode(file, src, &doc)
	errs, ok := strictyaml.Collect(err)
	if !ok {
		return nil, err
	}
	v := newValidator(pos, errs)
	p := v.plan(&doc)
	p.pos = pos
	if refs != nil {
		p.checkRefs(ctx, refs, v)
	}
	if err := v.result(); err != nil {
		return nil, err
	}
	// The plan keeps pos, which may read the source again when Check first places a problem
	// (strictyaml computes a JSON document's positions on demand), long after the caller's
	// buffer was reused: it takes its own compressed copy, now that the plan is built.
	pos.Keep()
	return p, nil
}
