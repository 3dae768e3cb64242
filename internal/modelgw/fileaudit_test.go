package modelgw

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// fileReportBody is a /audit/file body for path.
func fileReportBody(path string) string {
	b, _ := json.Marshal(map[string]string{"tool": "write_file", "path": path, "op": "write", "reason": "path outside the workspace"})
	return string(b)
}

// TestGateway_FileWouldDeny (file.would_deny): a learn dispatch's gateway records a
// write outside the workspace as file.would_deny, with who could have sent it: the worker
// (its key) or anything in the sandbox (a forged one: no key, a wrong one). A plain
// dispatch's gateway refuses it unrecorded; a body that is not exactly a report (a duplicate
// or case-folded key, an unknown op, a control character or an over-long path) is refused
// unrecorded; a secret in the path is masked. Failed before: /audit/file was 404 and no
// writer recorded file.would_deny.
func TestGateway_FileWouldDeny(t *testing.T) {
	plain := start(t, Config{APIKey: []byte(testKey)})
	if resp, got := plain.do(t, http.MethodPost, "/audit/file", nil, fileReportBody("/etc/passwd")); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), "not a learn dispatch") {
		t.Errorf("a plain dispatch's /audit/file = %d %q, want 400 not a learn dispatch", resp.StatusCode, got)
	}
	if n := len(plain.audit.ofKind(entry.FileWouldDeny)); n != 0 {
		t.Errorf("a plain dispatch recorded %d file.would_deny", n)
	}

	secret := "s3cr3t-value-of-a-bundle"
	g := start(t, Config{APIKey: []byte(testKey), Learn: true, Secrets: [][]byte{[]byte(secret)}})
	workerKey := strings.Repeat("ab", 32)
	for name, body := range map[string]string{
		"duplicate path":    `{"tool":"write_file","path":"/a","path":"/b","op":"write","reason":"x"}`,
		"case-folded key":   `{"tool":"write_file","Path":"/a","op":"write","reason":"x"}`,
		"unknown field":     `{"tool":"write_file","path":"/a","op":"write","reason":"x","reporter":"worker"}`,
		"unknown op":        `{"tool":"write_file","path":"/a","op":"chmod","reason":"x"}`,
		"no path":           `{"tool":"write_file","path":"","op":"write","reason":"x"}`,
		"terminal escape":   `{"tool":"write_file","path":"/etc/\u001b[2Jx","op":"write","reason":"x"}`,
		"newline":           `{"tool":"write_file","path":"/etc/x\nfile.would_deny /y","op":"write","reason":"x"}`,
		"path over the cap": fileReportBody("/" + strings.Repeat("a", MaxWouldDenyPath)),
		"bad tool":          `{"tool":"1write","path":"/a","op":"write","reason":"x"}`,
		"not an object":     `["/a"]`,
	} {
		if resp, got := g.do(t, http.MethodPost, "/audit/file", nil, body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %q, want 400", name, resp.StatusCode, got)
		}
	}
	if n := len(g.audit.ofKind(entry.FileWouldDeny)); n != 0 {
		t.Fatalf("%d malformed reports recorded", n)
	}
	if resp, got := g.do(t, http.MethodGet, "/audit/file", nil, ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /audit/file = %d %q, want 405", resp.StatusCode, got)
	}

	post := func(hdr http.Header, path string) entry.WouldDenyEntry {
		t.Helper()
		if resp, got := g.do(t, http.MethodPost, "/audit/file", hdr, fileReportBody(path)); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("a report of %q = %d %q, want 204", path, resp.StatusCode, got)
		}
		all := g.audit.ofKind(entry.FileWouldDeny)
		d := all[len(all)-1]
		if d["dispatch"] != testDispatchID || d[entry.KeyRole] != testRole {
			t.Errorf("the entry speaks for %v %v, want the gateway's dispatch and role", d["dispatch"], d[entry.KeyRole])
		}
		w, _ := entry.ReadWouldDeny(entry.FileWouldDeny, d)
		return w
	}
	if w := post(http.Header{WorkerKeyHeader: {workerKey}}, "/etc/hosts"); w.Reporter != ReporterSandbox {
		t.Errorf("a keyed report before the claim: reporter %q, want sandbox", w.Reporter)
	}
	if resp, got := g.do(t, http.MethodPost, "/worker/claim", nil, `{"key":"`+workerKey+`"}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("claim = %d %q", resp.StatusCode, got)
	}
	w := post(http.Header{WorkerKeyHeader: {workerKey}}, "../outside/x.txt")
	if w.Reporter != ReporterWorker || w.Path != "../outside/x.txt" || w.Op != "write" || w.Tool != "write_file" || w.Reason != "path outside the workspace" {
		t.Errorf("the worker's report reads %+v", w)
	}
	if w := post(http.Header{WorkerKeyHeader: {strings.Repeat("cd", 32)}}, "/agora/worker"); w.Reporter != ReporterSandbox {
		t.Errorf("a wrong key: reporter %q, want sandbox", w.Reporter)
	}
	if w := post(nil, "/tmp/"+secret+"/x"); strings.Contains(w.Path, secret) || w.Reporter != ReporterSandbox {
		t.Errorf("a secret in the path is on record: %+v", w)
	}
}

// TestGateway_FileWouldDenyBudget (file.would_deny; attack: a huge count): an agent
// writing outside the workspace in a loop, or posting reports itself, spends the
// dispatch's audit budget and no more: past it every report is refused unrecorded, 503,
// which stops the worker.
func TestGateway_FileWouldDenyBudget(t *testing.T) {
	var calls limitCalls
	g := start(t, Config{APIKey: []byte(testKey), Learn: true, MaxAuditEntries: 21, OnLimit: calls.onLimit, RefusalInterval: forever})
	refused := 0
	for i := range 200 {
		resp, _ := g.do(t, http.MethodPost, "/audit/file", nil, fileReportBody(fmt.Sprintf("/tmp/x%d", i)))
		if resp.StatusCode != http.StatusNoContent {
			refused++
		}
	}
	if err := g.gw.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(g.audit.all()); n > 21 {
		t.Errorf("%d entries, over the budget of 21", n)
	}
	if n := len(g.audit.ofKind(entry.FileWouldDeny)); n == 0 || n > 10 || refused < 190 {
		t.Errorf("%d file.would_deny kept and %d of 200 refused; want at most 10 kept (two entries each) and the rest refused", n, refused)
	}
	if len(calls.all()) != 1 {
		t.Errorf("OnLimit called %v, want once", calls.all())
	}
}

// FuzzFileAuditDecode decodes arbitrary /audit/file bodies: never a panic, and a report it
// accepts says what every case-sensitive reader of the body reads, field by field, with a
// path a person can be shown.
func FuzzFileAuditDecode(f *testing.F) {
	for _, s := range []string{
		fileReportBody("/etc/passwd"), fileReportBody("../x"),
		`{"tool":"write_file","path":"/a","Path":"/b","op":"write"}`, `{"path":"a","path":"b"}`,
		`{"tool":"Write","path":"/x","op":"edit","reason":"","call_id":"toolu_1"}`,
		`{"path":"/etc/\u001b[2Jx"}`, `{"\u0070ath":"x"}`, `{}`, `[]`, `{"op":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r fileAuditRequest
		if decodeFlat(body, fileAuditFields, &r) != nil {
			return
		}
		if r.validate() != nil {
			return
		}
		var top map[string]any
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("accepted a body encoding/json refuses: %q", body)
		}
		for k, got := range map[string]string{"tool": r.Tool, "path": r.Path, "op": r.Op, "reason": r.Reason, "call_id": r.CallID} {
			if v, ok := top[k].(string); ok && v != got || !ok && got != "" {
				t.Fatalf("field %s decoded %q, a case-sensitive reader sees %v in %q", k, got, top[k], body)
			}
		}
		if checkWouldDenyPath(r.Path) != nil || strings.ContainsAny(r.Path, "\x00\n\r\x1b") {
			t.Fatalf("accepted path %q", r.Path)
		}
	})
}
