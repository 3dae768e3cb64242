package selftest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// The audit attacks are the host's: after a dispatch the runner exports the throw-away
// home's audit log (agora audit export), tampers with the bundle the way someone who holds
// the file and wants a dispatch's record changed would, and asks agora verify, pinned to the
// home's public key, whether it holds. The sandbox cannot reach the log at all; what it can
// send toward it (the gateway's reports, a flood of refusals) is observed in the log itself.

// logEntry is one entry of `agora audit log -o json`.
type logEntry struct {
	Seq     uint64         `json:"seq"`
	Actor   string         `json:"actor"`
	Kind    string         `json:"kind"`
	Subject string         `json:"subject"`
	Details map[string]any `json:"details"`
}

// dispatchEntries are the entries of the dispatch whose record is raw: its subject or actor
// names it.
func (r *run) dispatchEntries(ctx context.Context, raw []byte) ([]logEntry, error) {
	id := recordOf(raw).ID
	out, err := r.agora(ctx, "audit", "log", "-o", "json")
	if err != nil {
		return nil, err
	}
	var all []logEntry
	if err := json.Unmarshal(out, &all); err != nil {
		return nil, fmt.Errorf("read the throw-away home's audit log: %w", err)
	}
	var mine []logEntry
	for _, e := range all {
		if id != "" && (strings.Contains(e.Subject, id) || strings.Contains(e.Actor, id)) {
			mine = append(mine, e)
		}
	}
	return mine, nil
}

func decideAudit(entries []logEntry, want, what string, allowedOnly bool, status, said string) (string, string) {
	if allowedOnly {
		what += " with the decision allowed"
	}
	for _, e := range entries {
		b, _ := json.Marshal(e)
		if bytes.Contains(b, []byte(want)) && (!allowedOnly || e.Details[entry.KeyDecision] == "allowed") {
			return Allowed, fmt.Sprintf("audit entry %d (%s) holds %s", e.Seq, e.Kind, what)
		}
	}
	if status == "" {
		return NotRun, "the program left no report"
	}
	return Blocked, fmt.Sprintf("none of the dispatch's %d audit entries holds %s; the program: %s", len(entries), what, clip(said, 100))
}

func decideEntries(entries []logEntry, max string, h hostRecord) (string, string) {
	n, _ := strconv.Atoi(max)
	if len(entries) == 0 {
		return NotRun, "the dispatch has no audit entry (" + h.State + " " + h.Reason + ")"
	}
	kinds := map[string]int{}
	for _, e := range entries {
		kinds[e.Kind]++
	}
	if len(entries) > n {
		return Allowed, fmt.Sprintf("the dispatch wrote %d audit entries, more than %d: %v", len(entries), n, kinds)
	}
	return Blocked, fmt.Sprintf("the dispatch wrote %d audit entries (at most %d): %v", len(entries), n, kinds)
}

// verifyAnswer is agora verify's exit code and what it said.
type verifyAnswer struct {
	tampering string
	code      int
	said      string
}

// tamperings change an exported bundle's entries (decoded from its "entries"); id is the
// dispatch's, whose entries are the target. None recomputes what a forger could recompute
// (the leaf hashes); nobody but the home holds the key that signs checkpoints and
// selections. "none" leaves the bundle as exported: the twin that shows verify passes.
var tamperings = map[string]func(entries []map[string]any, id string) ([]map[string]any, error){
	"none": func(es []map[string]any, _ string) ([]map[string]any, error) { return es, nil },
	// drop-entry removes the dispatch's last entry (its end: how it ended is gone).
	"drop-entry": func(es []map[string]any, id string) ([]map[string]any, error) {
		i, err := lastOf(es, id)
		if err != nil {
			return nil, err
		}
		return append(es[:i:i], es[i+1:]...), nil
	},
	// drop-last removes the bundle's last entry, whoever's it is.
	"drop-last": func(es []map[string]any, _ string) ([]map[string]any, error) {
		if len(es) < 2 {
			return nil, errors.New("the bundle has fewer than two entries")
		}
		return es[:len(es)-1], nil
	},
	// edit-entry makes the dispatch's last entry name another dispatch, and recomputes its
	// leaf hash.
	"edit-entry": func(es []map[string]any, id string) ([]map[string]any, error) {
		i, err := lastOf(es, id)
		if err != nil {
			return nil, err
		}
		b, _ := entryBytes(es[i])
		setEntry(es[i], bytes.ReplaceAll(b, []byte(id), []byte(reverse(id))))
		return es, nil
	},
	// forge-entry appends a copy of the dispatch's last entry as the next one, its seq and
	// index moved on, its leaf hash recomputed and the proof of the entry it copies.
	"forge-entry": func(es []map[string]any, id string) ([]map[string]any, error) {
		i, err := lastOf(es, id)
		if err != nil {
			return nil, err
		}
		last := es[len(es)-1]
		n, err := strconv.ParseUint(fmt.Sprint(last["index"]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("the bundle's last index: %w", err)
		}
		b, _ := entryBytes(es[i])
		var e map[string]any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&e); err != nil {
			return nil, fmt.Errorf("read entry %d: %w", i, err)
		}
		e["seq"] = n + 1
		nb, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		forged := map[string]any{}
		for k, v := range es[i] {
			forged[k] = v
		}
		forged["index"] = n + 1
		setEntry(forged, nb)
		return append(es, forged), nil
	},
	// reorder swaps the dispatch's last entry with the one before it.
	"reorder": func(es []map[string]any, id string) ([]map[string]any, error) {
		i, err := lastOf(es, id)
		if err != nil || i == 0 {
			return nil, errors.Join(err, errors.New("no entry before the dispatch's last"))
		}
		a, _ := entryBytes(es[i-1])
		b, _ := entryBytes(es[i])
		setEntry(es[i-1], b)
		setEntry(es[i], a)
		return es, nil
	},
}

// lastOf is the index in es of the last entry naming id.
func lastOf(es []map[string]any, id string) (int, error) {
	for i := len(es) - 1; i >= 0; i-- {
		if b, err := entryBytes(es[i]); err == nil && bytes.Contains(b, []byte(id)) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no entry of the bundle names dispatch %s", id)
}

func entryBytes(e map[string]any) ([]byte, error) {
	s, _ := e["entry"].(string)
	return base64.StdEncoding.DecodeString(s)
}

// setEntry puts b as e's entry with the leaf hash RFC 6962 gives it.
func setEntry(e map[string]any, b []byte) {
	leaf := sha256.Sum256(append([]byte{0}, b...))
	e["entry"] = base64.StdEncoding.EncodeToString(b)
	e["leaf_hash"] = base64.StdEncoding.EncodeToString(leaf[:])
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// tamperAndVerify exports the throw-away home's log, tampers with it and runs agora verify
// on it with the home's public key.
func (r *run) tamperAndVerify(ctx context.Context, tampering string, raw []byte) (*verifyAnswer, error) {
	id := recordOf(raw).ID
	dir := filepath.Join(r.work, "audit", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "bundle.json")
	if _, err := r.agora(ctx, "audit", "export", "--out", file); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var bundle map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&bundle); err != nil {
		return nil, fmt.Errorf("read the exported bundle: %w", err)
	}
	list, _ := bundle["entries"].([]any)
	es := make([]map[string]any, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, errors.New("read the exported bundle: an entry is not an object")
		}
		es = append(es, m)
	}
	if es, err = tamperings[tampering](es, id); err != nil {
		return nil, fmt.Errorf("tamper with the bundle (%s): %w", tampering, err)
	}
	bundle["entries"] = es
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(bundle); err != nil {
		return nil, err
	}
	if tampering != "none" {
		file = filepath.Join(dir, "tampered.json")
		if err := os.WriteFile(file, out.Bytes(), 0o600); err != nil {
			return nil, err
		}
	}
	_, err = r.agora(ctx, "verify", file, "--key", filepath.Join(r.home, "keys", "audit.pub"))
	ans := &verifyAnswer{tampering: tampering}
	var ee *errExit
	switch {
	case errors.As(err, &ee):
		ans.code, ans.said = ee.code, strings.TrimSpace(ee.stderr)
	case err != nil:
		return nil, err
	}
	return ans, nil
}

// exitCheckFailed is agora verify's exit code for a failed check.
const exitCheckFailed = 5

func decideVerify(v *verifyAnswer) (string, string) {
	switch {
	case v == nil:
		return NotRun, "agora verify did not run"
	case v.code == 0:
		return Allowed, "agora verify passed the bundle (" + v.tampering + ")"
	case v.code == exitCheckFailed:
		return Blocked, "agora verify failed a check (exit 5): " + clip(v.said, 140)
	}
	return NotRun, fmt.Sprintf("agora verify exited %d, not with a failed check: %s", v.code, clip(v.said, 140))
}
