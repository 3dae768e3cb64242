package plan

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// The plan's JSON Schema is generated from the decoder's own types (planDoc and what it
// holds), so it cannot list a field the decoder refuses or miss one it reads; fieldDocs gives
// each field the words a model writing a plan follows, and a test fails for a field without
// them. The schema guides; the decoder and validator decide (every error at once, with its
// path), so a plan the schema lets through can still be refused, never the reverse for a
// field's presence.

// fieldDocs describes each field by its path: a dotted path of YAML names, [] for a list's
// items and {} for a map's values. The table is made on first use, not at init.
var fieldDocs = sync.OnceValue(func() map[string]string {
	return map[string]string{
		"":                                  "An agora plan: a DAG of tasks over the catalog's subagents. Unknown fields are errors.",
		"version":                           "Always 1.",
		"name":                              "The run name: 1-63 of a-z 0-9 . _ -, starting with a letter or digit. The same name, plan, subagent versions, workspace and commit return the existing run (unless the submitter asks for a new run); anything else starts a new one.",
		"concurrency":                       "How many tasks of this run may run at once, 1 to 1024 (default 4).",
		"workspace":                         "The catalog workspace every task works on (NAME or NAME@sha256:HEX); its commit is pinned at submit. Omitted: each task starts in an empty directory.",
		"revision":                          "With workspace: a branch or tag its patterns allow, or a full commit id reachable from one. Default: the workspace's default revision.",
		"queue":                             "The queue (agora.yaml queues:) whose concurrency bounds this run's running tasks together with every other run on it; default \"default\". An undeclared queue is refused, naming the declared ones.",
		"defaults":                          "Values every task takes unless it sets its own.",
		"budget":                            "The run's budget, shared by its tasks' attempts: once their model usage spends it, no further task is fired and the run ends budget-exceeded.",
		"budget.tokens":                     "Input plus output tokens, all attempts together; 0 or absent sets no limit.",
		"budget.usd":                        "US dollars at the prices of agora.yaml's models:, all attempts together; 0 or absent sets no limit.",
		"budget.model_calls":                "Model requests, all attempts together; 0 or absent sets no limit.",
		"tasks[].budget":                    "Narrows each attempt's budget: at most the plan's, the subagent's and the target's (a higher value is an error).",
		"tasks[].budget.tokens":             "Input plus output tokens of one attempt.",
		"tasks[].budget.usd":                "US dollars of one attempt.",
		"tasks[].budget.model_calls":        "Model requests of one attempt.",
		"defaults.target":                   "The target (agora.yaml) tasks run on; default the configured default target.",
		"defaults.env":                      "Env bundles (NAME or NAME@sha256:HEX) every task gets unless it lists its own.",
		"defaults.env[]":                    "An env bundle reference.",
		"defaults.timeout":                  "Each task's timeout, a Go duration such as 30s, 10m or 1h30m; at most 24h; default the target's.",
		"defaults.retry":                    "The retry policy every task inherits field by field.",
		"tasks":                             "The tasks, 1 to 100000. Order does not matter: depends_on, base and needs decide it.",
		"tasks[]":                           "One task: a dispatch of a subagent.",
		"tasks[].id":                        "A unique task id: 1-63 of a-z 0-9 _ -, starting with a letter or digit ('.', '[' and ']' are kept for the tasks a run adds: ID[KEY], ID.fix-N, ID.review-NAME).",
		"tasks[].subagent":                  "The subagent to dispatch: NAME or NAME@sha256:HEX (agora_subagents_list names them).",
		"tasks[].target":                    "The target this task runs on; overrides defaults.target.",
		"tasks[].env":                       "Env bundles for this task; replaces defaults.env ([] means none).",
		"tasks[].env[]":                     "An env bundle reference.",
		"tasks[].learn":                     "A person's decision, never an MCP client's: the task runs as a learn dispatch (docs/learn.md).",
		"tasks[].input":                     "The task's input: a JSON object, at most 120 KiB as canonical JSON. The agent reads it as AGORA_INPUT_JSON.",
		"tasks[].depends_on":                "Task ids that must succeed first. A task whose dependency fails is skipped.",
		"tasks[].depends_on[]":              "A task id of this plan.",
		"tasks[].base":                      "Stacks this task on upstream work (each entry implies depends_on it): its workspace starts from the run's commit with the approved patch of each base task applied, a base's own bases first, each once, as commits; its own patch is taken against that tree and applies on top of its bases'. The patches are also mounted at /agora/inputs/base/TASK/patch.diff. Bases that conflict fail the task stack-conflict before its agent runs. Not a fan_out group or a learn task; at most 64 entries.",
		"tasks[].base[]":                    "A task id of this plan whose approved patch this task builds on.",
		"tasks[].needs":                     "Upstream products handed to this task read-only at /agora/inputs/KEY; each implies depends_on its from task.",
		"tasks[].needs{}":                   "One hand-off.",
		"tasks[].needs{}.from":              "The upstream task id.",
		"tasks[].needs{}.select":            "patch (its patch as patch.diff), outputs (its outputs tree), verify (its verify gate's verdict as verify.json and the end of the command's output as output.txt; it must have a verify gate) or output:PATH (one output file).",
		"tasks[].locks":                     "Named resources held while the task runs, across all runs; a bare name is an exclusive lock.",
		"tasks[].locks[]":                   "A lock name (exclusive), or {name, mode}.",
		"tasks[].locks[].name":              "The lock name.",
		"tasks[].locks[].mode":              "exclusive (default) or shared.",
		"tasks[].retry":                     "This task's retry policy; fields set here override defaults.retry.",
		"tasks[].timeout":                   "This task's timeout, a Go duration such as 30s or 10m; at most 24h.",
		"tasks[].grants":                    "Narrows the subagent's grant for this task; a list given replaces that part with a subset of it, an omitted one keeps it.",
		"tasks[].grants.tools":              "Tool names, each one the subagent is granted.",
		"tasks[].grants.tools[]":            "A tool name.",
		"tasks[].grants.commands":           "Command patterns, each equal to one the subagent is granted.",
		"tasks[].grants.commands[]":         "A command pattern.",
		"tasks[].grants.egress":             "Egress rules, each covered by one the subagent is granted.",
		"tasks[].grants.egress[]":           "A host: \"api.example.com\", \"*.example.com\" (its subdomains), \"10.0.0.1\"; optionally with a port, \"api.example.com:443\"; or an object {host, port, methods, paths} that also limits the HTTP methods and path prefixes.",
		"tasks[].grants.egress[].host":      "A lowercase host name, *.domain or IP address.",
		"tasks[].grants.egress[].port":      "The only port allowed; absent allows any.",
		"tasks[].grants.egress[].methods":   "The only HTTP methods allowed, upper case.",
		"tasks[].grants.egress[].methods[]": "An HTTP method such as GET.",
		"tasks[].grants.egress[].paths":     "Path prefixes a request's path must start with.",
		"tasks[].grants.egress[].paths[]":   "A path prefix such as /repos/acme/.",
		"tasks[].grants.approve":            "Calls a person must approve before they run, added to the subagent's (never removing one).",
		"tasks[].grants.approve[]":          "A built-in tool name such as \"write_file\", or {command: PATTERN} for run_command argv matching the pattern.",
		"tasks[].grants.approve[].tool":     "A built-in tool name.",
		"tasks[].grants.approve[].command":  "An argv pattern such as \"git push *\".",
		"defaults.verify":                   "The verify gate every task takes unless it sets its own verify.",
		"tasks[].verify":                    "This task's verify gate (replaces defaults.verify): after the agent, agora runs command in a fresh sandbox of the task's target on the base tree plus the task's patch, with no model key, no secrets and no network. A non-zero exit, a timeout, a patch touching a protect path or a path outside changes, or (with expect) a missing or failing report fails the attempt verify-failed (never retried); the patch is kept.",
		"verify.command":                    "The command as an argv, no shell: [go, test, ./...]. The program is found on the sandbox's PATH (the target's verify_path first) or named by an absolute path.",
		"verify.command[]":                  "One argument.",
		"verify.timeout":                    "The command's wall clock, a Go duration such as 10m; at most 24h; default 10m.",
		"verify.protect":                    "Globs of paths the patch must not touch (doublestar: ** spans directories, * stays within one, {a,b} alternatives), such as **/*_test.go or .github/**. A hit fails the gate before the command runs.",
		"verify.protect[]":                  "A glob relative to the repository root.",
		"verify.changes":                    "Globs of the only paths the patch may touch (doublestar, as protect; byte-exact and case-sensitive), such as src/** and docs/**: any added, removed, renamed, re-moded or linked path outside them, a symbolic link whose target leaves the tree or lands outside them, or a submodule fails the gate before the command runs. Without changes any new file can change what the command runs (unittest/__main__.py, conftest.py, GNUmakefile): name what the work may change. Name a directory with /** (tests/** ; tests alone is the path tests itself).",
		"verify.changes[]":                  "A glob relative to the repository root.",
		"verify.expect":                     "Evidence the tests ran: agora gives the command an empty report directory ($AGORA_REPORT, /agora/report) outside the tree, and after every process ended reads the JUnit XML report junit from it. Exit 0 is green only when that report parses, names no failure or error and counts at least min_tests tests that ran (not skipped); otherwise the gate is red no-evidence.",
		"verify.expect.junit":               "The report's file name in $AGORA_REPORT, such as junit.xml (letters, digits, '.', '_', '-').",
		"verify.expect.min_tests":           "The fewest tests that must have run, at least 1; default 1.",
		"tasks[].fan_out":                   "Makes this task a fan-out: when from succeeds, its output select (a JSON list of at most 10000 items) adds one task per item, id ID[KEY] (KEY: the item's string id, else its index), running template with the item as input.item. This task then succeeds when all of them have; needs from it hand over each item task's product under KEY/. A fan_out task sets nothing but id and fan_out.",
		"tasks[].fan_out.from":              "The task that writes the list.",
		"tasks[].fan_out.select":            "output:PATH, the JSON list in from's outputs: at most 10000 items, each any JSON value; an object item's \"id\" (a-z 0-9 _ -, unique) names its task.",
		"tasks[].fan_out.template":          "Every item task's settings, the fields of a task without id: subagent is required; input (an object) gets the item under \"item\".",
		"tasks[].review":                    "A review quorum: once this task's work is done (and its verify gate green), each reviewer subagent gets its patch at /agora/inputs/patch/patch.diff (its verify verdict under /agora/inputs/verify/) and answers its review as its final answer, exactly {\"approve\": true|false, \"reasons\": [\"...\"]}; no file is read as a review. The work is approved when at least approve of them approve, else on_fail runs or the task fails naming the reasons.",
		"tasks[].review.subagents":          "1 to 9 reviewer subagents (NAME or NAME@sha256:HEX), distinct names, each of a model runtime (an exec command cannot review: put its check in verify); task ID.review-NAME runs each.",
		"tasks[].review.subagents[]":        "A reviewer subagent.",
		"tasks[].review.approve":            "How many reviewers must approve, 1 to the number of reviewers.",
		"tasks[].on_fail":                   "What runs when this task's work is judged red by its verify gate or its review.",
		"tasks[].on_fail.fix":               "A fix loop: each red verdict adds task ID.fix-N, a dispatch of subagent that starts from the red patch applied and gets it at /agora/inputs/patch/patch.diff with the reasons in its input; its work is judged by the same gates. The task succeeds with the first green fix, or fails after max_attempts fixes.",
		"tasks[].on_fail.fix.subagent":      "The fixer subagent (NAME or NAME@sha256:HEX).",
		"tasks[].on_fail.fix.max_attempts":  "Fixes at most, 1 to 10 (default 1).",
		"retry.max_attempts":                "Attempts in all, 1 to 100 (1: no retry).",
		"retry.initial_backoff":             "The first wait before a retry, a Go duration such as 1s.",
		"retry.multiplier":                  "How much each wait grows, 1 to 10.",
		"retry.max_backoff":                 "The longest wait, a Go duration.",
		"retry.on_worker_failed":            "Retry an attempt that failed worker-failed (default true).",
	}
})

// durationPattern is a Go duration as time.ParseDuration reads it, unsigned.
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

var (
	durationType = reflect.TypeFor[time.Duration]()
	lockType     = reflect.TypeFor[lockDoc]()
)

// JSONSchema is the plan format's JSON Schema, as a model reads it to write a plan.
func JSONSchema() *jsonschema.Schema {
	s, err := schemaOf(reflect.TypeFor[planDoc](), "")
	if err != nil {
		panic(err) // the types are fixed at build time; TestJSONSchema runs this
	}
	s.Required = []string{"version", "name", "tasks"}
	s.Properties["version"].Enum = []any{Version}
	tasks := s.Properties["tasks"].Items
	// A task names its subagent, or is a fan-out whose template does.
	tasks.Required = []string{"id"}
	tasks.OneOf = []*jsonschema.Schema{{Required: []string{"subagent"}}, {Required: []string{"fan_out"}}}
	// learn is a person's key (agora orch submit): the schema is what a model reads to write a
	// plan, and a model's plan may not learn (docs/learn.md), so it is not offered; a plan that
	// has it is refused over MCP.
	delete(tasks.Properties, "learn")
	fo := tasks.Properties["fan_out"]
	for _, v := range []*jsonschema.Schema{s.Properties["defaults"].Properties["verify"], tasks.Properties["verify"], fo.Properties["template"].Properties["verify"]} {
		v.Properties["expect"].Required = []string{"junit"}
	}
	fo.Required = []string{"from", "select", "template"}
	fo.Properties["template"].Required = []string{"subagent"}
	for _, t := range []*jsonschema.Schema{tasks, fo.Properties["template"]} {
		t.Properties["review"].Required = []string{"subagents", "approve"}
		t.Properties["on_fail"].Required = []string{"fix"}
		t.Properties["on_fail"].Properties["fix"].Required = []string{"subagent"}
	}
	return s
}

// schemaOf is t's schema at path (see fieldDocs).
func schemaOf(t reflect.Type, path string) (*jsonschema.Schema, error) {
	docPath := path
	if rest, ok := strings.CutPrefix(path, "tasks[].fan_out.template."); ok {
		docPath = "tasks[]." + rest // a template's fields are a task's
	}
	docs := fieldDocs()
	doc := docs[docPath]
	if strings.HasPrefix(docPath, "defaults.retry.") || strings.Contains(docPath, "].retry.") {
		doc = docs["retry."+docPath[strings.LastIndex(docPath, ".")+1:]]
	}
	if _, rest, ok := strings.Cut(docPath, "verify."); ok && (strings.HasPrefix(docPath, "defaults.verify.") || strings.Contains(docPath, "].verify.")) {
		doc = docs["verify."+rest]
	}
	if doc == "" {
		return nil, fmt.Errorf("plan schema: no description for %q: add it to fieldDocs", path)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := &jsonschema.Schema{Description: doc}
	switch {
	case t == durationType:
		s.Type, s.Pattern = "string", durationPattern
	case t == lockType:
		name, err := schemaOf(reflect.TypeFor[string](), path+".name")
		if err != nil {
			return nil, err
		}
		mode, err := schemaOf(reflect.TypeFor[string](), path+".mode")
		if err != nil {
			return nil, err
		}
		mode.Enum = []any{LockExclusive, LockShared}
		s.AnyOf = []*jsonschema.Schema{{Type: "string"}, {
			Type: "object", Properties: map[string]*jsonschema.Schema{"name": name, "mode": mode},
			Required: []string{"name"}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
		}}
	case t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(textType):
		// Written as a string or as the object (an egress rule: "host:port" or {host, ...}).
		obj, err := structSchema(t, path)
		if err != nil {
			return nil, err
		}
		s.AnyOf = []*jsonschema.Schema{{Type: "string"}, obj}
	case t.Kind() == reflect.Interface: // input
		s.Type = "object"
	case t.Kind() == reflect.String:
		s.Type = "string"
	case t.Kind() == reflect.Int:
		s.Type = "integer"
	case t.Kind() == reflect.Int64: // budgets: 0 (no limit) or more
		zero := 0.0
		s.Type, s.Minimum = "integer", &zero
	case t.Kind() == reflect.Uint16:
		one, most := 1.0, 65535.0
		s.Type, s.Minimum, s.Maximum = "integer", &one, &most
	case t.Kind() == reflect.Float64:
		s.Type = "number"
	case t.Kind() == reflect.Bool:
		s.Type = "boolean"
	case t.Kind() == reflect.Slice:
		items, err := schemaOf(t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		s.Type, s.Items = "array", items
	case t.Kind() == reflect.Map:
		values, err := schemaOf(t.Elem(), path+"{}")
		if err != nil {
			return nil, err
		}
		s.Type, s.AdditionalProperties = "object", values
	case t.Kind() == reflect.Struct:
		obj, err := structSchema(t, path)
		if err != nil {
			return nil, err
		}
		obj.Description = doc
		s = obj
	default:
		return nil, fmt.Errorf("plan schema: %s: no schema for %s", path, t)
	}
	return s, nil
}

var textType = reflect.TypeFor[encoding.TextUnmarshaler]()

// structSchema is the object schema of struct t at path: its yaml fields, nothing else.
func structSchema(t reflect.Type, path string) (*jsonschema.Schema, error) {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
	s.AdditionalProperties = &jsonschema.Schema{Not: &jsonschema.Schema{}}
	{
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" { // an inline struct (grant.Set in capability files; not here)
				return nil, fmt.Errorf("plan schema: %s.%s has no yaml name", path, f.Name)
			}
			child := name
			if path != "" {
				child = path + "." + name
			}
			fs, err := schemaOf(f.Type, child)
			if err != nil {
				return nil, err
			}
			s.Properties[name] = fs
		}
	}
	return s, nil
}
