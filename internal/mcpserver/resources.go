package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Everything a dispatch produced larger than a describe shows is readable as a resource:
// read-only, for any identified caller (the read ceiling), each read audited before its
// content leaves, at most maxContentRead bytes. Only what a record names is served: an
// output is looked up by its name in the dispatch's record, never opened by path.

const maxResourceURI = 2048

// resourceRef is a parsed agora:// URI.
type resourceRef struct {
	kind string // patch, output, log, transcript, run-patches, workspaces
	id   string // the dispatch or run id
	name string // the output's path, or the log's stream
}

// templates are the resource templates, listed by resources/templates/list.
var templates = []*mcp.ResourceTemplate{
	{Name: "dispatch-patch", URITemplate: "agora://dispatches/{id}/patch", MIMEType: "text/x-diff",
		Description: "A dispatch's whole patch (git diff --binary against its commit); agora_dispatch_describe shows the first 64 KiB."},
	{Name: "dispatch-output", URITemplate: "agora://dispatches/{id}/outputs/{name}",
		Description: "One file the dispatch left in its outputs; name is its path with every byte but letters, digits and - . _ ~ percent-encoded (a/b c.txt is a%2Fb%20c.txt), as describe's uris give it."},
	{Name: "dispatch-log", URITemplate: "agora://dispatches/{id}/logs/{stream}", MIMEType: "text/plain",
		Description: "A dispatch's stdout or stderr (stream is stdout or stderr), redacted."},
	{Name: "dispatch-transcript", URITemplate: "agora://dispatches/{id}/transcript", MIMEType: "application/jsonl",
		Description: "The model runtimes' transcript of a dispatch (JSON Lines), redacted."},
	{Name: "run-patches", URITemplate: "agora://runs/{id}/patches", MIMEType: "text/x-diff",
		Description: "Every succeeded task's patch of an orchestrator run, each after a '# task ID (dispatch ID)' line."},
}

// workspacesResource is the static list of workspaces: names, patterns, descriptions.
var workspacesResource = &mcp.Resource{Name: "workspaces", URI: "agora://workspaces", MIMEType: "application/json",
	Description: "The workspaces people registered, which agora_dispatch and plans may name: name, description, allowed revisions, default revision. Never a path."}

// parseResourceURI reads an agora:// URI strictly: one form per resource, ids of their own
// shape, an output name that is a clean relative path once decoded.
func parseResourceURI(uri string) (resourceRef, error) {
	bad := func(why string) (resourceRef, error) { return resourceRef{}, fmt.Errorf("resource URI: %s", why) }
	rest, ok := strings.CutPrefix(uri, "agora://")
	switch {
	case len(uri) > maxResourceURI:
		return bad(fmt.Sprintf("longer than %d bytes", maxResourceURI))
	case !ok:
		return bad("not an agora:// URI")
	case strings.ContainsAny(rest, "?#\\\x00"):
		return bad("a query, fragment, backslash or NUL")
	case rest == "workspaces":
		return resourceRef{kind: "workspaces"}, nil
	}
	seg := strings.Split(rest, "/")
	switch {
	case len(seg) == 3 && seg[0] == "runs" && seg[2] == "patches":
		if len(seg[1]) > maxRunIDLen || !runIDRE().MatchString(seg[1]) {
			return bad("not a run id")
		}
		return resourceRef{kind: "run-patches", id: seg[1]}, nil
	case len(seg) < 3 || seg[0] != "dispatches":
		return bad("want agora://dispatches/ID/..., agora://runs/ID/patches or agora://workspaces")
	case len(seg[1]) != dispatchIDLen || !idRE().MatchString(seg[1]):
		return bad("not a dispatch id")
	}
	id := seg[1]
	switch {
	case len(seg) == 3 && seg[2] == "patch":
		return resourceRef{kind: "patch", id: id}, nil
	case len(seg) == 3 && seg[2] == "transcript":
		return resourceRef{kind: "transcript", id: id}, nil
	case len(seg) == 4 && seg[2] == "logs" && (seg[3] == "stdout" || seg[3] == "stderr"):
		return resourceRef{kind: "log", id: id, name: seg[3]}, nil
	case len(seg) == 4 && seg[2] == "outputs":
		name, err := url.PathUnescape(seg[3])
		if err != nil || name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, 0) ||
			path.IsAbs(name) || path.Clean(name) != name || name == "." || name == ".." || strings.HasPrefix(name, "../") {
			return bad("not an output name")
		}
		return resourceRef{kind: "output", id: id, name: name}, nil
	}
	return bad("unknown resource of a dispatch (patch, outputs/NAME, logs/stdout, logs/stderr, transcript)")
}

// addResources registers the templates and the workspaces list on m, every read through
// readResource.
func (s *Server) addResources(m *mcp.Server, id identity) {
	for _, t := range templates {
		m.AddResourceTemplate(t, s.readResource(id))
	}
	m.AddResource(workspacesResource, s.readResource(id))
}

// readResource is the one path of every resource read: identify, check the ceiling, parse,
// audit, and only then read and return.
func (s *Server) readResource(id identity) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		p, ok := id(req)
		if !ok {
			s.auditResource(ctx, Principal{Client: "unidentified"}, entry.MCPResourceDenied, "denied", uri, resourceRef{})
			return nil, errors.New("resource refused: the caller is not identified")
		}
		if !p.Ceiling.Allows(CeilingRead) {
			s.auditResource(ctx, p, entry.MCPResourceDenied, "denied", uri, resourceRef{})
			return nil, fmt.Errorf("client %q may not read resources: its ceiling is %s", p.Client, p.Ceiling)
		}
		ref, err := parseResourceURI(uri)
		if err != nil {
			s.auditResource(ctx, p, entry.MCPResourceDenied, "invalid", uri, resourceRef{})
			return nil, err
		}
		// Where it is and how large, before anything is read: a read over the limit is
		// refused, and audited as refused.
		a, mime, err := s.locate(ctx, ref)
		if err == nil && a != nil && a.Size > maxContentRead {
			err = fmt.Errorf("it is %d bytes, over the %d bytes one resource read returns; read it on the host with the agora CLI", a.Size, maxContentRead)
		}
		var parts []runPatch
		if err == nil && ref.kind == "run-patches" {
			parts, err = s.runPatchParts(ctx, ref.id)
		}
		if err != nil {
			s.auditResource(ctx, p, entry.MCPResourceDenied, "refused", uri, ref)
			return nil, errors.New(s.scrub(err.Error()))
		}
		if err := s.auditResource(ctx, p, entry.MCPResourceRead, "allowed", uri, ref); err != nil {
			return nil, errors.New("resource refused: the audit log could not record this read")
		}
		var b []byte
		switch {
		case a != nil:
			b, err = s.cfg.Dispatcher.Content(ctx, a.Digest, maxContentRead)
		case ref.kind == "workspaces":
			b, err = s.workspacesJSON(ctx)
		default:
			b, err = s.runPatches(ctx, parts)
		}
		if err != nil {
			return nil, errors.New(s.scrub(err.Error()))
		}
		if !s.redactor.Empty() {
			b = s.redactor.Bytes(b)
		}
		c := &mcp.ResourceContents{URI: uri, MIMEType: mime}
		if utf8.Valid(b) {
			c.Text = string(b)
		} else {
			c.Blob = b
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
	}
}

// auditResource writes one entry for a read: the kind of resource, the id, and a hash of the
// URI (an output's name is the agent's words: it is not repeated into the log).
func (s *Server) auditResource(ctx context.Context, p Principal, kind, decision, uri string, ref resourceRef) error {
	sum := sha256.Sum256([]byte(uri))
	details := map[string]any{entry.KeyDecision: decision, "ceiling": p.Ceiling.String(), "uri_sha256": hex.EncodeToString(sum[:])}
	if ref.kind != "" {
		details["resource"] = ref.kind
	}
	if ref.id != "" {
		details["id"] = ref.id
	}
	err := s.cfg.Audit(ctx, AuditEntry{Actor: p.Client, Kind: kind, Subject: "mcp/resource", Details: details})
	if err != nil {
		s.log.Error("audit resource read", "client", p.Client, "err", err)
	}
	return err
}

// locate finds the stored artifact ref names (nil for the workspaces list and a run's
// patches, which are put together at read time) and its MIME type, through the ports.
func (s *Server) locate(ctx context.Context, ref resourceRef) (*Artifact, string, error) {
	switch ref.kind {
	case "workspaces":
		return nil, "application/json", nil
	case "run-patches":
		if s.cfg.Orchestrator == nil {
			return nil, "", ErrOrchestratorDown
		}
		return nil, "text/x-diff", nil
	}
	r, err := s.cfg.Dispatcher.Get(ctx, ref.id)
	if err != nil {
		return nil, "", notFound(err, "dispatch", ref.id)
	}
	var a *Artifact
	mime := "text/plain"
	switch ref.kind {
	case "patch":
		a, mime = r.Patch, "text/x-diff"
	case "transcript":
		a, mime = r.Transcript, "application/jsonl"
	case "log":
		a = r.Stdout
		if ref.name == "stderr" {
			a = r.Stderr
		}
	case "output":
		for _, o := range r.Outputs {
			if o.Path == ref.name {
				a, mime = &Artifact{Digest: o.Digest, Size: o.Size}, "application/octet-stream"
			}
		}
		if a == nil {
			return nil, "", fmt.Errorf("dispatch %s has no output %q", r.ID, ref.name)
		}
	}
	if a == nil {
		return nil, "", fmt.Errorf("dispatch %s has no %s (yet)", r.ID, ref.kind)
	}
	return a, mime, nil
}

func (s *Server) readArtifact(ctx context.Context, a *Artifact) ([]byte, error) {
	if a.Size > maxContentRead {
		return nil, fmt.Errorf("it is %d bytes, over the %d bytes one resource read returns; read it on the host with the agora CLI", a.Size, maxContentRead)
	}
	return s.cfg.Dispatcher.Content(ctx, a.Digest, maxContentRead)
}

// workspaceItem is a workspace as MCP shows it: never its path.
type workspaceItem struct {
	Name            string   `json:"name"`
	Description     string   `json:"description,omitempty"`
	Revisions       []string `json:"revisions"`
	DefaultRevision string   `json:"default_revision,omitempty"`
}

func (s *Server) workspacesJSON(ctx context.Context) ([]byte, error) {
	vs, err := s.cfg.Catalog.List(ctx, catalog.KindWorkspace)
	if err != nil {
		return nil, err
	}
	items := []workspaceItem{}
	for _, v := range vs {
		items = append(items, workspaceItem{Name: v.Name, Description: v.Meta.Description, Revisions: v.Meta.Revisions, DefaultRevision: v.Meta.DefaultRevision})
	}
	return json.Marshal(items)
}

// runPatch is one succeeded task of a run, with its dispatch's patch (nil: no changes).
type runPatch struct {
	task, dispatch string
	patch          *Artifact
}

// runPatchParts lists a run's succeeded tasks in the order of its tasks, with their patches,
// and refuses, before anything is read, a run whose patches together are over what one read
// returns.
func (s *Server) runPatchParts(ctx context.Context, id string) ([]runPatch, error) {
	raw, err := s.cfg.Orchestrator.Status(ctx, id)
	if err != nil {
		return nil, notFound(err, "run", id)
	}
	var run struct {
		Tasks []struct {
			ID         string `json:"id"`
			State      string `json:"state"`
			DispatchID string `json:"dispatch_id"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(raw, &run); err != nil {
		return nil, err
	}
	var parts []runPatch
	var total int64
	for _, t := range run.Tasks {
		if t.State != lifecycle.TaskSucceeded || t.DispatchID == "" {
			continue
		}
		r, err := s.cfg.Dispatcher.Get(ctx, t.DispatchID)
		if err != nil {
			return nil, err
		}
		p := runPatch{task: t.ID, dispatch: t.DispatchID}
		if r.Patch != nil && r.Patch.Size > 0 {
			p.patch = r.Patch
			total += r.Patch.Size
		}
		total += int64(len(t.ID) + len(t.DispatchID) + 32) // the header line, and "(no changes)"
		if total > maxContentRead {
			return nil, fmt.Errorf("the run's patches are over the %d bytes one resource read returns; read them with agora orch patches on the host", maxContentRead)
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// runPatches concatenates the parts' patches, each after a line naming its task and dispatch.
func (s *Server) runPatches(ctx context.Context, parts []runPatch) ([]byte, error) {
	var out []byte
	for _, p := range parts {
		out = fmt.Appendf(out, "# task %s (dispatch %s)\n", p.task, p.dispatch)
		if p.patch == nil {
			out = append(out, "# (no changes)\n"...)
			continue
		}
		b, err := s.readArtifact(ctx, p.patch)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}
