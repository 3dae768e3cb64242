package toolreg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/agora-dev/agora/internal/grant"
)

// Registry holds every registered tool. It is the privileged half: only the worker's wiring
// holds it, and a runtime is handed a [View] from [Registry.For], never the Registry.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*entry // guarded by mu
}

// entry is a registered tool with its compiled schema. Entries are immutable once registered.
type entry struct {
	info    ToolInfo
	schema  *objectSchema
	handler func(ctx context.Context, c Call) (Result, error)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]*entry{}}
}

// Register adds t. It refuses a bad or duplicate name, a missing description or handler, and a
// schema that is not valid JSON, not closed, or outside the supported subset.
func (r *Registry) Register(t Tool) error {
	if !validName(t.Name) {
		return fmt.Errorf("register tool %q: want a name of lowercase letters, digits and underscores, starting with a letter, at most %d bytes", t.Name, MaxToolNameLen)
	}
	if t.Description == "" {
		return fmt.Errorf("register tool %q: empty description", t.Name)
	}
	if t.Handler == nil {
		return fmt.Errorf("register tool %q: no handler", t.Name)
	}
	if !json.Valid(t.Schema) {
		return fmt.Errorf("register tool %q: schema is not valid JSON", t.Name)
	}
	s, err := compileSchema(t.Schema)
	if err != nil {
		return fmt.Errorf("register tool %q: schema: %w", t.Name, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, t.Schema); err != nil {
		return fmt.Errorf("register tool %q: schema: %w", t.Name, err)
	}
	e := &entry{
		info:    ToolInfo{Name: t.Name, Description: t.Description, Schema: compact.Bytes(), ReadOnly: t.ReadOnly},
		schema:  s,
		handler: t.Handler,
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[t.Name]; dup {
		return fmt.Errorf("register tool %q: %w", t.Name, ErrDuplicateTool)
	}
	r.tools[t.Name] = e
	return nil
}

// ErrDuplicateTool is matched when [Registry.Register] is given a name already registered.
var ErrDuplicateTool = errors.New("already registered")

// For returns the view of role (the subagent's name and digest, "name@sha256:hex") for one
// dispatch: exactly the tools of g.Tools that are registered now, with g handed to their
// handlers, and every call audited to a. The view is fixed at this point: later registrations
// and later changes to g do not reach it.
//
// A view without a role or without an auditor cannot attribute or record its calls, so it
// fails closed: it lists nothing and refuses every call.
func (r *Registry) For(dispatchID, role string, g grant.Set, a Auditor, opts ...ViewOption) *View {
	v := &View{
		dispatchID: dispatchID,
		role:       role,
		grants:     g.Clone(),
		auditor:    a,
		tools:      map[string]*entry{},
		refusals:   map[string]string{},
	}
	for _, o := range opts {
		o(v)
	}
	switch {
	case role == "":
		v.broken = "view has no role"
	case a == nil:
		v.broken = "view has no auditor"
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for name := range r.tools {
		v.refusals[name] = ReasonNotGranted
	}
	if v.broken != "" {
		return v
	}
	names := v.grants.Tools
	if v.learn {
		// A learn view offers every registered tool; Call reports those the grant lacks.
		names = slices.Sorted(maps.Keys(r.tools))
	}
	for _, name := range names {
		e, ok := r.tools[name]
		if !ok {
			if validName(name) {
				v.refusals[name] = ReasonNotRegistered
			}
			continue
		}
		delete(v.refusals, name)
		v.tools[name] = e
		if !slices.Contains(v.names, name) {
			v.names = append(v.names, name)
		}
	}
	slices.Sort(v.names)
	return v
}
