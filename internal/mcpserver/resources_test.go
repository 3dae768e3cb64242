package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/mcpserver"
)

const resID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

// resultsFixture has one finished dispatch with a patch over 64 KiB, a final answer, an
// output in a subdirectory and both logs.
func resultsFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture()
	var patch strings.Builder
	patch.WriteString("diff --git a/big.txt b/big.txt\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,5000 @@\n")
	for range 5000 {
		patch.WriteString("+héllo wörld, a line of the patch\n")
	}
	f.disp.content = map[string][]byte{
		"sha256:patch":  []byte(patch.String()),
		"sha256:final":  []byte("The fix is in.\n"),
		"sha256:out":    []byte("nested\n"),
		"sha256:stdout": []byte(strings.Repeat("x", 10000) + "the end of stdout\n"),
		"sha256:stderr": []byte("warn\n"),
		"sha256:huge":   nil,
	}
	r := record(resID, "finished")
	r.Patch = &mcpserver.Artifact{Digest: "sha256:patch", Size: int64(patch.Len())}
	r.Outputs = []mcpserver.Output{{Path: "final.md", Digest: "sha256:final", Size: 15}, {Path: "sub/a b.txt", Digest: "sha256:out", Size: 7}}
	r.Stdout = &mcpserver.Artifact{Digest: "sha256:stdout", Size: 10018}
	r.Stderr = &mcpserver.Artifact{Digest: "sha256:stderr", Size: 5}
	r.Transcript = &mcpserver.Artifact{Digest: "sha256:huge", Size: 17 << 20}
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
		if id != resID {
			return nil, mcpserver.ErrNotFound
		}
		return r, nil
	}
	return f, patch.String()
}

func TestDescribe_Results(t *testing.T) {
	f, patch := resultsFixture(t)
	cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
	var out struct {
		Results mcpserver.Results `json:"results"`
	}
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": resID}), &out)
	r := out.Results
	if r.Patch == nil || !r.Patch.Truncated || len(r.Patch.Text) > 64<<10 || !strings.HasPrefix(patch, r.Patch.Text) || r.Patch.Size != int64(len(patch)) {
		t.Errorf("patch view: truncated %v, %d bytes of text, size %d", r.Patch.Truncated, len(r.Patch.Text), r.Patch.Size)
	}
	if r.Patch.URI != "agora://dispatches/"+resID+"/patch" || r.Patch.Digest != "sha256:patch" {
		t.Errorf("patch uri %q digest %q", r.Patch.URI, r.Patch.Digest)
	}
	if r.Diffstat == nil || *r.Diffstat != (mcpserver.Diffstat{Files: 1, Insertions: 5000}) {
		t.Errorf("diffstat = %+v", r.Diffstat)
	}
	if r.Final == nil || r.Final.Text != "The fix is in.\n" || r.Final.Truncated {
		t.Errorf("final = %+v", r.Final)
	}
	if len(r.Outputs) != 2 || r.Outputs[1].URI != "agora://dispatches/"+resID+"/outputs/sub%2Fa%20b.txt" {
		t.Errorf("outputs = %+v", r.Outputs)
	}
	if !strings.HasSuffix(r.StdoutTail, "the end of stdout\n") || len(r.StdoutTail) > 4096 || r.StderrTail != "warn\n" {
		t.Errorf("tails: %d bytes of stdout, stderr %q", len(r.StdoutTail), r.StderrTail)
	}
}

func readResource(t *testing.T, cs *mcp.ClientSession, uri string) (string, error) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", err
	}
	return res.Contents[0].Text, nil
}

func TestResources_ReadAuditedAndBounded(t *testing.T) {
	f, patch := resultsFixture(t)
	cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
	base := "agora://dispatches/" + resID
	for uri, want := range map[string]string{
		base + "/patch": patch,
		base + "/outputs/" + url.PathEscape("sub/a b.txt"): "nested\n",
		base + "/logs/stderr":                              "warn\n",
	} {
		got, err := readResource(t, cs, uri)
		if err != nil || got != want {
			t.Errorf("%s: %d bytes, %v", uri, len(got), err)
		}
	}
	n := len(f.audit.all())
	if _, err := readResource(t, cs, base+"/transcript"); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Errorf("a 17 MiB transcript: %v, want refused over the limit", err)
	}
	entries := f.audit.all()
	if len(entries) != n+1 || entries[n].Kind != entry.MCPResourceDenied || entries[n].Details["decision"] != "refused" {
		t.Errorf("the refused read was not audited as refused: %+v", entries[n:])
	}
	reads := 0
	for _, e := range entries {
		if e.Kind == entry.MCPResourceRead && e.Details["decision"] == "allowed" && e.Actor == "tester" {
			reads++
			for _, v := range e.Details {
				if s, ok := v.(string); ok && strings.Contains(s, "a b.txt") {
					t.Errorf("the audit entry repeats the output's name: %+v", e.Details)
				}
			}
		}
	}
	if reads != 3 {
		t.Errorf("%d allowed reads audited, want 3", reads)
	}
	for _, uri := range []string{
		base + "/outputs/..%2F..%2Fetc%2Fpasswd", base + "/outputs/missing", base + "/logs/stdin",
		"agora://dispatches/" + strings.Repeat("A", 26) + "/patch", "agora://dispatches/01ARZ3NDEKTSV4RRFFQ69G5FAZ/patch",
	} {
		if got, err := readResource(t, cs, uri); err == nil {
			t.Errorf("%s: read %q, want refused", uri, got)
		}
	}
	// An audit log that cannot record refuses the read.
	f.audit.mu.Lock()
	f.audit.fail = context.DeadlineExceeded
	f.audit.mu.Unlock()
	if _, err := readResource(t, cs, base+"/patch"); err == nil || !strings.Contains(err.Error(), "audit") {
		t.Errorf("read with a failing audit log: %v", err)
	}
}

func TestParseResourceURI_Attacks(t *testing.T) {
	for _, uri := range []string{
		"agora://dispatches/" + resID + "/outputs/..%2Fsecret", "agora://dispatches/" + resID + "/outputs/%2Fetc%2Fshadow",
		"agora://dispatches/" + resID + "/outputs/a%00b", "agora://dispatches/" + resID + "/outputs/",
		"agora://dispatches/" + resID + "/outputs/a/b", "agora://dispatches/" + resID + "/patch?x=1",
		"agora://dispatches/" + resID + "/patch#f", "agora://dispatches/..%2F" + resID + "/patch",
		"agora://dispatches/" + resID + "/logs/../patch", "file:///etc/passwd", "agora://runs/../patches",
		"agora://dispatches/" + resID + "/outputs/" + strings.Repeat("a", 3000), "AGORA://workspaces",
		"agora://workspaces/", "agora://dispatches/" + resID, "agora://dispatches/" + resID + "/outputs/%ZZ",
		"agora://dispatches/" + resID + "/logs/stdin", "agora://dispatches/" + resID + "/logs/STDOUT",
		"agora://dispatches/" + resID + "/logs/stdout%00", "agora://dispatches/" + resID + "/patch\x00",
		"agora://dispatches/" + resID + "%2Fpatch", "agora://dispatches/" + strings.ToLower(resID) + "x/patch",
		"agora://runs/run-1%2F..%2Fx/patches", "agora://runs/run-1/patches/", "https://dispatches/" + resID + "/patch",
		"agora:/dispatches/" + resID + "/patch", "agora://" + strings.Repeat("dispatches/"+resID+"/", 200) + "patch",
		"agora://dispatches/" + resID + "/outputs/a%2F..%2F..%2Fb", "agora://dispatches/" + resID + "/outputs/.",
	} {
		if ref, err := mcpserver.ParseResourceURIForTest(uri); err == nil {
			t.Errorf("%q parsed as %+v, want refused", uri, ref)
		}
	}
}

func FuzzParseResourceURI(f *testing.F) {
	for _, s := range []string{"agora://workspaces", "agora://dispatches/" + resID + "/patch", "agora://dispatches/" + resID + "/outputs/a%2Fb",
		"agora://runs/run-1/patches", "agora://dispatches/" + resID + "/logs/stdout", "agora://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		ref, err := mcpserver.ParseResourceURIForTest(uri)
		if err != nil {
			return
		}
		if ref.Kind == "output" && (strings.HasPrefix(ref.Name, "/") || strings.Contains("/"+ref.Name+"/", "/../") ||
			strings.Contains("/"+ref.Name+"/", "/./") || strings.Contains(ref.Name, "//") || strings.ContainsRune(ref.Name, 0)) {
			t.Fatalf("%q: output name %q leaves the outputs", uri, ref.Name)
		}
	})
}

func FuzzDiffstat(f *testing.F) {
	f.Add([]byte("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"))
	f.Add([]byte("diff --git a/x b/x\nGIT binary patch\nliteral 3\nKcmZ?\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := mcpserver.DiffstatForTest(b)
		if d.Files < 0 || d.Insertions < 0 || d.Deletions < 0 || d.Insertions+d.Deletions > len(b) {
			t.Fatalf("diffstat %+v of %d bytes", d, len(b))
		}
	})
}

// TestDescribe_PatchCutInsideARune: a text patch whose 64 KiB cut falls inside a character is
// cut before it and is not called binary; a patch holding bytes that are not UTF-8 is.
func TestDescribe_PatchCutInsideARune(t *testing.T) {
	head := "diff --git a/t.txt b/t.txt\n--- a/t.txt\n+++ b/t.txt\n@@ -1 +1 @@\n+"
	for _, tc := range []struct {
		name   string
		patch  string
		binary bool
	}{
		// "é" is 2 bytes, "€" 3: the byte at 64 KiB is the second of one of them.
		{"2-byte rune", head + strings.Repeat("a", 64<<10-len(head)-1) + strings.Repeat("é", 10) + "\n", false},
		{"3-byte rune", head + strings.Repeat("a", 64<<10-len(head)-2) + strings.Repeat("€", 10) + "\n", false},
		{"not UTF-8", head + "\xff\xfe" + strings.Repeat("a", 70<<10) + "\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			f.disp.content = map[string][]byte{"sha256:patch": []byte(tc.patch)}
			r := record(resID, "finished")
			r.Patch = &mcpserver.Artifact{Digest: "sha256:patch", Size: int64(len(tc.patch))}
			f.disp.get = func(context.Context, string) (*mcpserver.Record, error) { return r, nil }
			cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
			var out struct {
				Results mcpserver.Results `json:"results"`
			}
			decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": resID}), &out)
			p := out.Results.Patch
			if p == nil || !p.Truncated || p.Binary != tc.binary || len(p.Text) > 64<<10 {
				t.Fatalf("patch view: %d bytes of text, truncated %v, binary %v", len(p.Text), p.Truncated, p.Binary)
			}
			if !tc.binary && (!strings.HasPrefix(tc.patch, p.Text) || len(p.Text) < 64<<10-3) {
				t.Errorf("text is not the patch's first 64 KiB, cut before the split character: %d bytes, ends %q", len(p.Text), p.Text[max(0, len(p.Text)-8):])
			}
		})
	}
}

// FuzzCutText: what describe shows of a text is valid UTF-8 within its bound, a prefix of a
// text that was valid, and said to be cut whenever something was left out.
func FuzzCutText(f *testing.F) {
	f.Add([]byte("héllo wörld"), 2)
	f.Add([]byte("a€b"), 3)
	f.Add([]byte("\xff\xfe\xfd"), 2)
	f.Add([]byte("ok"), 0)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		n = max(0, n%64)
		s, cut := mcpserver.CutTextForTest(b, n)
		if len(s) > n || !utf8.ValidString(s) {
			t.Fatalf("cutText(%q, %d) = %q: over the bound or not UTF-8", b, n, s)
		}
		if len(b) > n && !cut {
			t.Fatalf("cutText(%q, %d) = %q, not said to be cut", b, n, s)
		}
		if utf8.Valid(b) && (!strings.HasPrefix(string(b), s) || len(s) < min(len(b), n)-utf8.UTFMax+1) {
			t.Fatalf("cutText(%q, %d) = %q: not the longest whole-character prefix", b, n, s)
		}
	})
}

// FuzzTailText: a log's tail is valid UTF-8 within its bound and, for a valid log, its end.
func FuzzTailText(f *testing.F) {
	f.Add([]byte("héllo wörld"), 3)
	f.Add([]byte("\xff\x80\xfeabc"), 4)
	f.Add([]byte("€€€"), 4)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		n = max(0, n%64)
		s := mcpserver.TailTextForTest(b, n)
		if len(s) > n || !utf8.ValidString(s) {
			t.Fatalf("tailText(%q, %d) = %q: over the bound or not UTF-8", b, n, s)
		}
		if utf8.Valid(b) && (!strings.HasSuffix(string(b), s) || len(s) < min(len(b), n)-utf8.UTFMax+1) {
			t.Fatalf("tailText(%q, %d) = %q: not the longest whole-character suffix", b, n, s)
		}
	})
}

// statusOrchestrator answers Status with a fixed run.
type statusOrchestrator struct {
	fakeOrchestrator
	run string
}

func (o *statusOrchestrator) Status(context.Context, string) (json.RawMessage, error) {
	return json.RawMessage(o.run), nil
}

// TestResources_RunPatches: a run's patches come in the order of its tasks, each after its
// header, only for succeeded tasks; a run whose patches are over one read's limit is refused
// before any is read, and audited as refused, never as allowed.
func TestResources_RunPatches(t *testing.T) {
	const d1, d2, d3 = "01ARZ3NDEKTSV4RRFFQ69G5FA1", "01ARZ3NDEKTSV4RRFFQ69G5FA2", "01ARZ3NDEKTSV4RRFFQ69G5FA3"
	run := `{"id":"run-1","state":"done","tasks":[
		{"id":"fix","state":"succeeded","dispatch_id":"` + d1 + `"},
		{"id":"broken","state":"failed","dispatch_id":"` + d2 + `"},
		{"id":"noop","state":"succeeded","dispatch_id":"` + d3 + `"}]}`
	patch := "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
	for _, big := range []bool{false, true} {
		f := newFixture()
		f.orch = &statusOrchestrator{run: run}
		f.disp.content = map[string][]byte{"sha256:p1": []byte(patch), "sha256:p2": []byte("never\n")}
		size := int64(len(patch))
		if big {
			size = 17 << 20 // the content is never read: the fake has 36 bytes for it
		}
		recs := map[string]*mcpserver.Record{d1: record(d1, "finished"), d2: record(d2, "failed"), d3: record(d3, "finished")}
		recs[d1].Patch = &mcpserver.Artifact{Digest: "sha256:p1", Size: size}
		recs[d2].Patch = &mcpserver.Artifact{Digest: "sha256:p2", Size: 6}
		f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
			if r, ok := recs[id]; ok {
				return r, nil
			}
			return nil, mcpserver.ErrNotFound
		}
		cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
		got, err := readResource(t, cs, "agora://runs/run-1/patches")
		last := f.audit.all()[len(f.audit.all())-1]
		if !big {
			want := "# task fix (dispatch " + d1 + ")\n" + patch + "# task noop (dispatch " + d3 + ")\n# (no changes)\n"
			if err != nil || got != want {
				t.Errorf("run patches = %q, %v; want %q", got, err, want)
			}
			if last.Kind != entry.MCPResourceRead || last.Details["resource"] != "run-patches" {
				t.Errorf("audit = %+v", last)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "over the") {
			t.Errorf("17 MiB of run patches: %q, %v; want refused", got, err)
		}
		for _, e := range f.audit.all() {
			if e.Kind == entry.MCPResourceRead {
				t.Errorf("the refused read was audited as allowed: %+v", e)
			}
		}
		if last.Kind != entry.MCPResourceDenied || last.Details["decision"] != "refused" {
			t.Errorf("the refused read was not audited as refused: %+v", last)
		}
	}
}

// TestDescribe_FinalAndTailsBounded: final.md over 16 KiB comes back cut and said so, with its
// size and where to read the rest; a log that ends in bytes that are not UTF-8 still gives a
// tail within 4 KiB.
func TestDescribe_FinalAndTailsBounded(t *testing.T) {
	f := newFixture()
	final := strings.Repeat("The answer, at length. ", 1000) // 23 KB
	garbage := strings.Repeat("\xffa", 4000)                 // each lone byte becomes U+FFFD, three bytes
	f.disp.content = map[string][]byte{"sha256:final": []byte(final), "sha256:log": []byte(garbage)}
	r := record(resID, "finished")
	r.Outputs = []mcpserver.Output{{Path: "final.md", Digest: "sha256:final", Size: int64(len(final))}}
	r.Stdout = &mcpserver.Artifact{Digest: "sha256:log", Size: int64(len(garbage))}
	f.disp.get = func(context.Context, string) (*mcpserver.Record, error) { return r, nil }
	cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
	var out struct {
		Results mcpserver.Results `json:"results"`
	}
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": resID}), &out)
	fv := out.Results.Final
	if fv == nil || !fv.Truncated || len(fv.Text) > 16<<10 || len(fv.Text) < 16<<10-3 || !strings.HasPrefix(final, fv.Text) ||
		fv.Size != int64(len(final)) || fv.URI != "agora://dispatches/"+resID+"/outputs/final.md" {
		t.Errorf("final: %d bytes of text, truncated %v, size %d, uri %q", len(fv.Text), fv.Truncated, fv.Size, fv.URI)
	}
	if tail := out.Results.StdoutTail; len(tail) > 4<<10 || len(tail) == 0 || !utf8.ValidString(tail) {
		t.Errorf("stdout tail of a binary log: %d bytes, valid UTF-8 %v", len(tail), utf8.ValidString(tail))
	}
}

// TestResources_OutputURIsRoundTrip: every output's uri in describe reads back that output,
// whatever characters its name holds.
func TestResources_OutputURIsRoundTrip(t *testing.T) {
	names := []string{"a b.txt", "100%.md", "q?x#y.txt", "ü/ñ.txt", "plus+sign&amp;.txt", "dir/sub/deep.json", "semi;colon=eq.txt", "tab\there.txt"}
	f := newFixture()
	f.disp.content = map[string][]byte{}
	r := record(resID, "finished")
	for i, n := range names {
		d := fmt.Sprintf("sha256:o%d", i)
		f.disp.content[d] = []byte("content of " + n)
		r.Outputs = append(r.Outputs, mcpserver.Output{Path: n, Digest: d, Size: int64(len("content of " + n))})
	}
	f.disp.get = func(context.Context, string) (*mcpserver.Record, error) { return r, nil }
	cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
	var out struct {
		Results mcpserver.Results `json:"results"`
	}
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": resID}), &out)
	if len(out.Results.Outputs) != len(names) {
		t.Fatalf("outputs = %+v", out.Results.Outputs)
	}
	for _, o := range out.Results.Outputs {
		got, err := readResource(t, cs, o.URI)
		if err != nil || got != "content of "+o.Path {
			t.Errorf("%q via %s: %q, %v", o.Path, o.URI, got, err)
		}
	}
}

// FuzzOutputNameRoundTrip: an output name, escaped as describe escapes it, parses back to
// itself, and its URI holds nothing but unreserved characters and percent escapes (what a
// URI template's {name} matches).
func FuzzOutputNameRoundTrip(f *testing.F) {
	for _, s := range []string{"a b.txt", "semi;colon=eq.txt", "plus+&.txt", "ü/ñ.txt", "100%.md", "q?x#y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		esc := mcpserver.EscapeNameForTest(name)
		for i := 0; i < len(esc); i++ {
			if c := esc[i]; !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%", rune(c)) {
				t.Fatalf("escapeName(%q) = %q holds %q", name, esc, c)
			}
		}
		ref, err := mcpserver.ParseResourceURIForTest("agora://dispatches/" + resID + "/outputs/" + esc)
		if err == nil && ref.Name != name {
			t.Fatalf("%q escaped as %q parses back as %q", name, esc, ref.Name)
		}
		clean := name != "" && utf8.ValidString(name) && !strings.ContainsRune(name, 0) && !strings.HasPrefix(name, "/") &&
			path.Clean(name) == name && name != "." && name != ".." && !strings.HasPrefix(name, "../") && len(esc) < 1500
		if clean && err != nil {
			t.Fatalf("the output name %q (%q) is refused: %v", name, esc, err)
		}
	})
}
