package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Argument limits. Each is also in the published input schema, so a client can see it.
const (
	maxArgsBytes   = 2 << 20 // one call's arguments
	maxPlanBytes   = 1 << 20 // an orchestrator plan
	maxEnvs        = 16
	maxTimeout     = 86400 // seconds: the longest any target allows
	maxWait        = 300   // seconds a call may block
	defaultWait    = 30
	maxRefLen      = 64 + len("@sha256:") + 64
	maxTargetLen   = 64
	maxRunIDLen    = 96 // a ULID, or a schedule's run NAME@SLOT (63 + 1 + 20)
	maxScheduleLen = 63
	dispatchIDLen  = 26
	defaultWatchTO = 30
)

// Patterns shared by the schemas and the checks, so both accept exactly the same strings.
const (
	refPattern    = `^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?(@sha256:[0-9a-f]{64})?$`
	targetPattern = `^[A-Za-z0-9]([A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$`
	idPattern     = `^[0-9A-HJKMNP-TV-Z]{26}$` // a ULID, as the dispatcher mints them
	// runIDPattern is a run id (a ULID), a plan name, or a schedule's run NAME@SLOT.
	runIDPattern    = `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}(@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)?$`
	schedulePattern = `^[a-z0-9][a-z0-9_-]{0,62}$`
	// revisionPattern is the alphabet of a revision; catalog.ParseRevision has the rest.
	revisionPattern = `^[A-Za-z0-9_+][A-Za-z0-9._+/-]*$`
)

// The patterns compile on first use: no work at init.
var (
	refRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(refPattern) })
	targetRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(targetPattern) })
	idRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(idPattern) })
	runIDRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(runIDPattern) })

	scheduleRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(schedulePattern) })

	revisionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(revisionPattern) })
)

// noArgs is the input of the three lists: nothing.
type noArgs struct{}

func (*noArgs) check() error { return nil }

// dispatchArgs is the whole of what agora_dispatch accepts.
type dispatchArgs struct {
	// Subagent is a pointer so that a given "" is told from an absent subagent: beside resume,
	// "subagent":"" is a subagent given (which resume refuses, as its schema does), not none.
	Subagent       *string         `json:"subagent,omitempty"`
	Resume         *resumeArgs     `json:"resume,omitempty"`
	Envs           []string        `json:"envs,omitempty"`
	Target         *string         `json:"target,omitempty"` // nil: the default target; never ""
	Input          json.RawMessage `json:"input,omitempty"`
	TimeoutSeconds *int64          `json:"timeout_seconds,omitempty"`
	WaitSeconds    *int64          `json:"wait_seconds,omitempty"`
	Workspace      *string         `json:"workspace,omitempty"`
	Revision       *string         `json:"revision,omitempty"`
}

// resumeArgs answer a dispatch's question: the child starts as `agora dispatch resume` does.
type resumeArgs struct {
	Dispatch string `json:"dispatch"`
	Answer   string `json:"answer"`
}

// UnmarshalJSON reads resume as strictly as the arguments around it: an object whose keys are
// exactly dispatch and answer, each once and not null, as its schema says. Without it, a key
// the schema refuses (or one spelled in another case, or given twice) was taken or ignored.
func (r *resumeArgs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return argErrorf("argument \"resume\" must be an object with dispatch and answer")
	}
	if err := scanKeys(b, []string{"dispatch", "answer"}); err != nil {
		return argErrorf("argument \"resume\": %s", err.Error())
	}
	type plain resumeArgs
	return json.Unmarshal(b, (*plain)(r))
}

// maxAnswer caps a resume's answer (it joins the parent's input, within MaxInputJSON).
const maxAnswer = 16 << 10

func (a *dispatchArgs) check() error {
	if a.Resume != nil {
		return a.checkResume()
	}
	if a.Subagent == nil {
		return argErrorf("argument \"subagent\" is required")
	}
	if err := checkRef("subagent", *a.Subagent); err != nil {
		return err
	}
	if len(a.Envs) > maxEnvs {
		return argErrorf("argument \"envs\" names %d env bundles; at most %d are allowed", len(a.Envs), maxEnvs)
	}
	seen := map[string]bool{}
	for _, e := range a.Envs {
		if err := checkRef("envs", e); err != nil {
			return err
		}
		if seen[e] {
			return argErrorf("argument \"envs\" names %q twice", e)
		}
		seen[e] = true
	}
	if a.Target != nil && *a.Target == "" {
		return argErrorf("argument \"target\" is empty; omit it for the default target")
	}
	if a.Target != nil && (len(*a.Target) > maxTargetLen || !targetRE().MatchString(*a.Target)) {
		return argErrorf("argument \"target\" is not a target name (letters, digits, '.', '_' or '-', at most %d)", maxTargetLen)
	}
	if a.Input != nil {
		if !isObject(a.Input) {
			return argErrorf("argument \"input\" must be a JSON object")
		}
		// The dispatcher's own check, applied before anything is recorded: the limit is
		// on the canonical form, which is what reaches the worker.
		if _, err := wire.CanonicalInput(a.Input); errors.Is(err, wire.ErrInputTooLarge) {
			return argErrorf("argument \"input\" is over the limit of %d bytes of canonical JSON (RFC 8785)", wire.MaxInputJSON)
		} else if err != nil {
			return argErrorf("argument \"input\" has no canonical JSON form: numbers must be integers within ±2^53 (write others as strings)")
		}
	}
	if err := checkRange("timeout_seconds", a.TimeoutSeconds, 1, maxTimeout); err != nil {
		return err
	}
	if err := checkWorkspace(a.Workspace, a.Revision); err != nil {
		return err
	}
	return checkRange("wait_seconds", a.WaitSeconds, 0, maxWait)
}

// checkResume allows, with resume, only wait_seconds: the child inherits everything else
// from the dispatch it answers.
func (a *dispatchArgs) checkResume() error {
	if a.Subagent != nil || a.Envs != nil || a.Target != nil || a.Input != nil || a.TimeoutSeconds != nil || a.Workspace != nil || a.Revision != nil {
		return argErrorf("argument \"resume\" answers a dispatch, whose child inherits its subagent, envs, target, input, timeout and workspace: give only resume and wait_seconds")
	}
	if len(a.Resume.Dispatch) != dispatchIDLen || !idRE().MatchString(a.Resume.Dispatch) {
		return argErrorf("argument \"resume.dispatch\" is not a dispatch id")
	}
	if strings.TrimSpace(a.Resume.Answer) == "" {
		return argErrorf("argument \"resume.answer\" is empty")
	}
	if len(a.Resume.Answer) > maxAnswer || !utf8.ValidString(a.Resume.Answer) {
		return argErrorf("argument \"resume.answer\" must be UTF-8 text of at most %d bytes", maxAnswer)
	}
	return checkRange("wait_seconds", a.WaitSeconds, 0, maxWait)
}

// checkWorkspace checks the workspace's name and the revision's form; whether the workspace
// exists and allows the revision is the dispatcher's to say.
func checkWorkspace(ws, rev *string) error {
	if ws != nil {
		if err := checkRef("workspace", *ws); err != nil {
			return err
		}
	}
	if rev == nil {
		return nil
	}
	if ws == nil {
		return argErrorf("argument \"revision\" needs a workspace: name one with \"workspace\"")
	}
	if len(*rev) > catalog.MaxRevisionLen || !revisionRE().MatchString(*rev) {
		return argErrorf("argument \"revision\" is not a branch, tag or full commit id (letters, digits, '.', '_', '-', '+', '/'; at most %d)", catalog.MaxRevisionLen)
	}
	if _, err := catalog.ParseRevision(*rev); err != nil {
		return argErrorf("argument \"revision\" is not a branch, tag or full commit id: no revision syntax (~ ^ @{ :), HEAD, refs/ or '..'")
	}
	return nil
}

// idArgs names one dispatch.
type idArgs struct {
	ID string `json:"id"`
}

func (a *idArgs) check() error {
	if a.ID == "" {
		return argErrorf("argument \"id\" is required")
	}
	if !idRE().MatchString(a.ID) {
		return argErrorf("argument \"id\" is not a dispatch id (26 characters, as agora_dispatch returned it)")
	}
	return nil
}

// describeArgs names one dispatch and, with wait_seconds, how long to wait for it to move.
type describeArgs struct {
	ID          string `json:"id"`
	WaitSeconds *int64 `json:"wait_seconds,omitempty"`
}

func (a *describeArgs) check() error {
	if err := (&idArgs{ID: a.ID}).check(); err != nil {
		return err
	}
	return checkRange("wait_seconds", a.WaitSeconds, 0, maxWait)
}

// submitArgs carries one orchestrator plan.
type submitArgs struct {
	Plan json.RawMessage `json:"plan"`
	// NewRun starts a new run even when a run of the same identity exists (which is returned
	// otherwise: a retried call makes one run).
	NewRun bool `json:"new_run,omitempty"`
}

func (a *submitArgs) check() error {
	if a.Plan == nil {
		return argErrorf("argument \"plan\" is required")
	}
	if len(a.Plan) > maxPlanBytes {
		return argErrorf("argument \"plan\" is %d bytes, over the %d-byte limit", len(a.Plan), maxPlanBytes)
	}
	if !isObject(a.Plan) {
		return argErrorf("argument \"plan\" must be a JSON object")
	}
	return learnInPlan(a.Plan)
}

// runArgs names one orchestrator run.
type runArgs struct {
	RunID string `json:"run_id"`
}

func (a *runArgs) check() error { return checkRunID(a.RunID) }

// scheduleArgs names one schedule.
type scheduleArgs struct {
	Name string `json:"name"`
}

func (a *scheduleArgs) check() error {
	if a.Name == "" {
		return argErrorf("argument \"name\" is required")
	}
	if len(a.Name) > maxScheduleLen || !scheduleRE().MatchString(a.Name) {
		return argErrorf("argument \"name\" is not a schedule name (lowercase letters, digits, '_' or '-', at most %d)", maxScheduleLen)
	}
	return nil
}

// watchArgs names a run and how long to wait for it to change.
type watchArgs struct {
	RunID          string `json:"run_id"`
	TimeoutSeconds *int64 `json:"timeout_seconds,omitempty"`
}

func (a *watchArgs) check() error {
	if err := checkRunID(a.RunID); err != nil {
		return err
	}
	return checkRange("timeout_seconds", a.TimeoutSeconds, 1, maxWait)
}

func checkRef(field, ref string) error {
	if ref == "" {
		return argErrorf("argument %q is required", field)
	}
	if len(ref) > maxRefLen || !refRE().MatchString(ref) {
		return argErrorf("argument %q holds a reference that is not NAME or NAME@sha256:HEX (lowercase letters, digits, '.', '_', '-'; 64 hex digits)", field)
	}
	return nil
}

func checkRunID(id string) error {
	if id == "" {
		return argErrorf("argument \"run_id\" is required")
	}
	if !runIDRE().MatchString(id) {
		return argErrorf("argument \"run_id\" is not a run id")
	}
	return nil
}

func checkRange(field string, v *int64, lo, hi int64) error {
	if v != nil && (*v < lo || *v > hi) {
		return argErrorf("argument %q must be between %d and %d", field, lo, hi)
	}
	return nil
}

// isObject reports whether raw is a JSON object (it was decoded already, so the first byte
// decides).
func isObject(raw json.RawMessage) bool {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b == '{'
	}
	return false
}

// Property schemas, keyed by argument name. schemaFor checks that they cover exactly the
// argument type's fields. They are functions, called once when the tool table is built (on
// first use): the plan's schema is derived by reflection, work no process pays at init.
func refSchema(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc, Pattern: refPattern, MaxLength: jsonschema.Ptr(maxRefLen)}
}

func intSchema(desc string, lo, hi int, def *int) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "integer", Description: desc, Minimum: jsonschema.Ptr(float64(lo)), Maximum: jsonschema.Ptr(float64(hi))}
	if def != nil {
		s.Default = json.RawMessage(fmt.Sprint(*def))
	}
	return s
}

func runIDSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: "the run id agora_orchestrator_submit returned", Pattern: runIDPattern, MaxLength: jsonschema.Ptr(maxRunIDLen)}
}

func noProps() map[string]*jsonschema.Schema { return map[string]*jsonschema.Schema{} }

func dispatchProps() map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{
		"subagent": refSchema("the subagent to run: NAME for its latest version or NAME@sha256:HEX to pin one (see agora_subagents_list); required unless resume is given"),
		"resume": {Type: "object", Description: "instead of a new dispatch: answer the question of a dispatch in needs_input; its child starts with the same subagent, envs, target, workspace and input plus the answer (give only resume and wait_seconds)",
			Properties: map[string]*jsonschema.Schema{
				"dispatch": {Type: "string", Description: "the id of the dispatch that asked", Pattern: idPattern, MinLength: jsonschema.Ptr(dispatchIDLen), MaxLength: jsonschema.Ptr(dispatchIDLen)},
				"answer":   {Type: "string", Description: "the answer, one of its options or your own words", MinLength: jsonschema.Ptr(1), MaxLength: jsonschema.Ptr(maxAnswer)},
			},
			Required: []string{"dispatch", "answer"}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}},
		"envs": {Type: "array", Description: "env bundles to apply, in order; a later bundle's key wins (see agora_envs_list)",
			Items: refSchema("NAME or NAME@sha256:HEX"), MaxItems: jsonschema.Ptr(maxEnvs), UniqueItems: true},
		"target": {Type: "string", Description: "where the worker runs, a target configured by the operator; default: the default target",
			Pattern: targetPattern, MaxLength: jsonschema.Ptr(maxTargetLen)},
		"input":           {Type: "object", Description: "the worker's input, a JSON object (it sees it as AGORA_INPUT_JSON); at most 120 KiB (122880 bytes) as canonical JSON (RFC 8785)"},
		"timeout_seconds": intSchema("wall-clock limit for the worker; default and maximum: the target's", 1, maxTimeout, nil),
		"wait_seconds":    intSchema("how long this call waits for the dispatch to end before returning its record anyway", 0, maxWait, jsonschema.Ptr(defaultWait)),
		"workspace":       refSchema(workspaceDesc),
		"revision": {Type: "string", Description: "with workspace: a branch or tag name the workspace allows, or a full commit id reachable from one; default: the workspace's default revision",
			Pattern: revisionPattern, MaxLength: jsonschema.Ptr(catalog.MaxRevisionLen)},
	}
}

func idProps() map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{
		"id": {Type: "string", Description: "the dispatch id agora_dispatch returned", Pattern: idPattern, MinLength: jsonschema.Ptr(dispatchIDLen), MaxLength: jsonschema.Ptr(dispatchIDLen)},
	}
}

func describeProps() map[string]*jsonschema.Schema {
	p := idProps()
	p["wait_seconds"] = intSchema("wait up to this many seconds for the dispatch to change state (or phase) or end, then describe it; "+
		"one that already ended, needs_input included, is described at once; 0 or absent: no wait", 0, maxWait, jsonschema.Ptr(0))
	return p
}

func submitProps() map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{"plan": planSchema(), "new_run": {Type: "boolean", Default: json.RawMessage("false"),
		Description: "start a new run even when a run of the same name, plan, subagent versions and workspace commit exists; " +
			"without it that run is returned (so a retried call never starts two)"}}
}

func runProps() map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{"run_id": runIDSchema()}
}

func scheduleProps() map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{"name": {Type: "string", Description: "the schedule's name, as agora_orchestrator_schedules_list lists it",
		Pattern: schedulePattern, MaxLength: jsonschema.Ptr(maxScheduleLen)}}
}

func watchProps() map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{
		"run_id":          runIDSchema(),
		"timeout_seconds": intSchema("how long to wait for a change or the end", 1, maxWait, jsonschema.Ptr(defaultWatchTO)),
	}
}

// planSchema is the plan format's own schema (generated from its decoder's types), so a model
// has the format to follow; the service still checks every plan and answers every problem at
// once.
func planSchema() *jsonschema.Schema {
	s := plan.JSONSchema()
	s.Description = "The plan: a DAG of tasks over registered subagents (agora_subagents_list), at most 2 MiB as JSON. " +
		"Name a workspace to give the tasks code. " + s.Description
	return s
}

// ArgumentError is a call whose arguments were refused. Its message names the argument and what
// is wrong, never the value.
type ArgumentError struct{ Msg string }

func (e *ArgumentError) Error() string { return e.Msg }

func argErrorf(format string, args ...any) error {
	return &ArgumentError{Msg: fmt.Sprintf(format, args...)}
}

// checker is implemented by every argument type: what the schema says, checked in Go.
type checker interface{ check() error }

// decodeArgs is the one path from a call's raw arguments to a typed value, for every tool. It
// is strict where encoding/json alone is lenient: keys must match exactly (encoding/json folds
// case), appear once (encoding/json keeps the last), and not be null (encoding/json reads null
// as "absent"); the value must be one UTF-8 JSON object under the size cap. Anything it
// accepts also validates against the tool's published input schema (FuzzToolArguments).
// fields are T's JSON keys, jsonFields(T), found once per tool rather than on every call.
func decodeArgs[T any, P interface {
	*T
	checker
}](raw json.RawMessage, fields []string) (T, error) {
	var v T
	if len(raw) > maxArgsBytes {
		return v, argErrorf("arguments are %d bytes, over the %d-byte limit", len(raw), maxArgsBytes)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if !utf8.Valid(raw) {
		return v, argErrorf("arguments are not valid UTF-8")
	}
	if !json.Valid(raw) {
		return v, argErrorf("arguments are not valid JSON")
	}
	if raw[0] != '{' {
		return v, argErrorf("arguments must be a JSON object")
	}
	if err := scanKeys(raw, fields); err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, typeError(err)
	}
	if err := P(&v).check(); err != nil {
		return v, err
	}
	return v, nil
}

// scanKeys walks the top level of the object: every key known, exact and unique, no null value,
// nothing after the object.
func scanKeys(raw []byte, fields []string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return argErrorf("arguments are not valid JSON")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return argErrorf("arguments are not valid JSON")
		}
		key, ok := tok.(string)
		if !ok {
			return argErrorf("arguments are not valid JSON")
		}
		if !slices.Contains(fields, key) {
			if len(fields) == 0 {
				return argErrorf("unknown argument %s: this tool takes no arguments", quoteKey(key))
			}
			return argErrorf("unknown argument %s; allowed: %s", quoteKey(key), strings.Join(fields, ", "))
		}
		if seen[key] {
			return argErrorf("argument %q appears twice", key)
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return argErrorf("arguments are not valid JSON")
		}
		if string(val) == "null" {
			return argErrorf("argument %q may not be null; leave it out instead", key)
		}
	}
	if _, err := dec.Token(); err != nil {
		return argErrorf("arguments are not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return argErrorf("arguments hold more than one JSON value")
	}
	return nil
}

// quoteKey quotes an unknown key for a message, cut short: it came from the caller.
func quoteKey(k string) string {
	if len(k) > 64 {
		k = k[:64]
		for !utf8.ValidString(k) {
			k = k[:len(k)-1]
		}
		return fmt.Sprintf("%q...", k)
	}
	return fmt.Sprintf("%q", k)
}

// typeError turns encoding/json's complaint into a sentence naming the argument but not the
// value.
func typeError(err error) error {
	var ae *ArgumentError
	if errors.As(err, &ae) {
		return ae // a nested object's own strict reading refused it
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		got, _, _ := strings.Cut(te.Value, " ")
		if te.Field != "" {
			return argErrorf("argument %q has the wrong type (got %s)", te.Field, got)
		}
		return argErrorf("arguments have the wrong type (got %s)", got)
	}
	return argErrorf("arguments are not valid JSON")
}

// jsonFields returns the JSON names of t's fields, in order.
func jsonFields(t reflect.Type) []string {
	out := []string{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// schemaFor builds T's input schema: the structure (object, required fields, no additional
// properties) inferred from T as the SDK would, with the property schemas given in props,
// which must name exactly T's fields.
func schemaFor[T any](props map[string]*jsonschema.Schema) (*jsonschema.Schema, *jsonschema.Resolved) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("input schema of %T: %v", *new(T), err))
	}
	if s.Type != "object" || s.AdditionalProperties == nil {
		panic(fmt.Sprintf("input schema of %T is not a closed object", *new(T)))
	}
	fields := jsonFields(reflect.TypeFor[T]())
	if len(fields) != len(props) {
		panic(fmt.Sprintf("input schema of %T: %d property schemas for %d fields", *new(T), len(props), len(fields)))
	}
	for _, f := range fields {
		p, ok := props[f]
		if !ok {
			panic(fmt.Sprintf("input schema of %T: no property schema for %q", *new(T), f))
		}
		s.Properties[f] = p
	}
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	r, err := s.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("input schema of %T: %v", *new(T), err))
	}
	return s, r
}
