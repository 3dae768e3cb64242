package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/verdict"
)

// Canonical returns the plan as RFC 8785 canonical JSON: the normalised plan Parse returned
// (defaults as written, not applied; bare lock names expanded to {name, mode}; durations as Go
// duration strings such as "5m0s"; unset fields left out). The same plan written in YAML or
// JSON, in any key order or style, has the same bytes, and Parse of these bytes returns an
// equal plan. p MUST come from [Parse]: a hand-built plan's Input is written as it is.
func (p *Plan) Canonical() []byte {
	w := &canonWriter{b: make([]byte, 0, 128+128*len(p.Tasks))}
	o := w.object()
	if !p.Budget.IsZero() {
		o.key("budget")
		w.budget(p.Budget)
	}
	o.key("concurrency")
	w.int(int64(p.Concurrency))
	if d := p.Defaults; d.Target != "" || d.Env != nil || d.Timeout != 0 || d.Retry != nil || d.Verify != nil {
		o.key("defaults")
		w.defaults(&d)
	}
	o.key("name")
	w.str(p.Name)
	if p.Queue != "" {
		// The default queue is "" and left out, written or not: a plan that names none
		// keeps the digest it had before queues existed.
		o.key("queue")
		w.str(p.Queue)
	}
	if p.Revision != "" {
		o.key("revision")
		w.str(p.Revision)
	}
	o.key("tasks")
	w.b = append(w.b, '[')
	for i := range p.Tasks {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.task(&p.Tasks[i])
	}
	w.b = append(w.b, ']')
	o.key("version")
	w.int(int64(p.Version))
	if p.Workspace != "" {
		o.key("workspace")
		w.str(p.Workspace)
	}
	o.end()
	return w.b
}

// Digest is "sha256:" and the hex SHA-256 of [Plan.Canonical]: the plan's identity, the same
// for the same plan in YAML and in JSON.
func (p *Plan) Digest() string { return DigestOf(p.Canonical()) }

// DigestOf is the digest of a plan whose canonical form is canonical: [Plan.Digest] for a
// caller that keeps the canonical form too, which a 100,000-task plan takes tens of
// megabytes and a noticeable part of a second to write.
func DigestOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonWriter appends canonical JSON. Objects are written with their keys in RFC 8785 order:
// the fixed field names below are listed sorted, and needs keys are sorted by UTF-16 units.
type canonWriter struct{ b []byte }

type canonObject struct {
	w *canonWriter
	n int
}

func (w *canonWriter) object() *canonObject {
	w.b = append(w.b, '{')
	return &canonObject{w: w}
}

func (o *canonObject) key(k string) {
	if o.n > 0 {
		o.w.b = append(o.w.b, ',')
	}
	o.n++
	o.w.str(k)
	o.w.b = append(o.w.b, ':')
}

func (o *canonObject) end() { o.w.b = append(o.w.b, '}') }

func (w *canonWriter) str(s string) {
	if plainASCII(s) { // ids, names and refs: nothing to escape
		w.b = append(w.b, '"')
		w.b = append(w.b, s...)
		w.b = append(w.b, '"')
		return
	}
	// jcs refuses only invalid UTF-8, which no parsed plan holds.
	b, _ := jcs.Marshal(strings.ToValidUTF8(s, "\uFFFD"))
	w.b = append(w.b, b...)
}

// plainASCII reports whether s is printable ASCII without '"' or '\', which RFC 8785 writes
// as it is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func (w *canonWriter) int(i int64) { w.b = strconv.AppendInt(w.b, i, 10) }

func (w *canonWriter) duration(d time.Duration) { w.str(d.String()) }

func (w *canonWriter) strs(ss []string) {
	w.b = append(w.b, '[')
	for i, s := range ss {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(s)
	}
	w.b = append(w.b, ']')
}

// rules writes egress rules: an unrestricted rule as its string, exactly the bytes a plan
// wrote before rules had ports and paths (so those plans keep their digests), a restricted
// one as its object in RFC 8785 form.
func (w *canonWriter) rules(rs []grant.EgressRule) {
	w.b = append(w.b, '[')
	for i, r := range rs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		if !r.Restricted() {
			w.str(r.String())
			continue
		}
		o := map[string]any{"host": r.Host, "methods": anySlice(r.Methods), "paths": anySlice(r.Paths)}
		if r.Port != 0 {
			o["port"] = float64(r.Port)
		}
		b, err := jcs.Marshal(o)
		if err != nil {
			panic(err) // strings and a small integer always encode
		}
		w.b = append(w.b, b...)
	}
	w.b = append(w.b, ']')
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// number writes f as ECMAScript's Number.prototype.toString does, which RFC 8785 requires.
func (w *canonWriter) number(f float64) {
	if f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		w.b = append(w.b, '0') // -0 is written 0; NaN and Inf never pass validation
		return
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		digits := strings.TrimLeft(exp[1:], "0")
		w.b = append(w.b, mant...)
		w.b = append(w.b, 'e', exp[0])
		w.b = append(w.b, digits...)
		return
	}
	w.b = strconv.AppendFloat(w.b, f, 'f', -1, 64)
}

func (w *canonWriter) defaults(d *Defaults) {
	o := w.object()
	if d.Env != nil {
		o.key("env")
		w.strs(d.Env)
	}
	if d.Retry != nil {
		o.key("retry")
		w.retry(d.Retry)
	}
	if d.Target != "" {
		o.key("target")
		w.str(d.Target)
	}
	if d.Timeout != 0 {
		o.key("timeout")
		w.duration(d.Timeout)
	}
	if d.Verify != nil {
		o.key("verify")
		w.verify(d.Verify)
	}
	o.end()
}

// verify writes a verify gate; a plan without one writes nothing, so its bytes (and digest)
// are those it had before verify gates existed.
func (w *canonWriter) verify(s *verdict.Spec) {
	o := w.object()
	if len(s.Changes) > 0 {
		o.key("changes")
		w.strs(s.Changes)
	}
	o.key("command")
	w.strs(s.Command)
	if e := s.Expect; e != nil {
		o.key("expect")
		eo := w.object()
		eo.key("junit")
		w.str(e.JUnit)
		if e.MinTests != 0 {
			eo.key("min_tests")
			w.int(int64(e.MinTests))
		}
		eo.end()
	}
	if len(s.Protect) > 0 {
		o.key("protect")
		w.strs(s.Protect)
	}
	if s.Timeout != 0 {
		o.key("timeout")
		w.duration(s.Timeout)
	}
	o.end()
}

// budget writes the fields of b that are set; a plan without a budget writes none, so its
// canonical bytes (and digest) are those it had before budgets existed.
func (w *canonWriter) budget(b budget.Budget) {
	o := w.object()
	if b.ModelCalls != 0 {
		o.key("model_calls")
		w.int(b.ModelCalls)
	}
	if b.Tokens != 0 {
		o.key("tokens")
		w.int(b.Tokens)
	}
	if b.USD != 0 {
		o.key("usd")
		w.number(b.USD)
	}
	o.end()
}

func (w *canonWriter) task(t *Task) {
	o := w.object()
	if len(t.Base()) > 0 { // only when set: a plan without base keeps its canonical bytes and digest
		o.key("base")
		w.strs(t.Base())
	}
	if !t.Budget().IsZero() {
		o.key("budget")
		w.budget(t.Budget())
	}
	if len(t.DependsOn) > 0 {
		o.key("depends_on")
		w.strs(t.DependsOn)
	}
	if t.Env != nil {
		o.key("env")
		w.strs(t.Env)
	}
	if t.FanOut() != nil {
		o.key("fan_out")
		w.fanOut(t.FanOut())
	}
	if g := t.Grants(); g != nil {
		o.key("grants")
		gw := w.object()
		if g.Commands != nil {
			gw.key("commands")
			w.strs(g.Commands)
		}
		if g.Egress != nil {
			gw.key("egress")
			w.rules(g.Egress)
		}
		if g.Tools != nil {
			gw.key("tools")
			w.strs(g.Tools)
		}
		gw.end()
	}
	if t.ID != "" { // a fan-out template has none
		o.key("id")
		w.str(t.ID)
	}
	if t.Input != nil {
		o.key("input")
		w.b = append(w.b, t.Input...)
	}
	if t.Learn() { // only when set: a plan without learn keeps its canonical bytes and digest
		o.key("learn")
		w.b = append(w.b, "true"...)
	}
	if len(t.Locks) > 0 {
		o.key("locks")
		w.b = append(w.b, '[')
		for i, l := range t.Locks {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			lo := w.object()
			lo.key("mode")
			w.str(l.Mode)
			lo.key("name")
			w.str(l.Name)
			lo.end()
		}
		w.b = append(w.b, ']')
	}
	if len(t.Needs()) > 0 {
		o.key("needs")
		w.needs(t.Needs())
	}
	if t.OnFail() != nil {
		o.key("on_fail")
		w.onFail(t.OnFail())
	}
	if t.Retry() != nil {
		o.key("retry")
		w.retry(t.Retry())
	}
	if t.Review() != nil {
		o.key("review")
		w.review(t.Review())
	}
	if t.Subagent != "" { // a fan-out task has none
		o.key("subagent")
		w.str(t.Subagent)
	}
	if t.Target != "" {
		o.key("target")
		w.str(t.Target)
	}
	if t.Timeout() != 0 {
		o.key("timeout")
		w.duration(t.Timeout())
	}
	if t.Verify() != nil {
		o.key("verify")
		w.verify(t.Verify())
	}
	o.end()
}

func (w *canonWriter) needs(needs map[string]Need) {
	keys := make([]string, 0, len(needs))
	for k := range needs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUTF16)
	o := w.object()
	for _, k := range keys {
		o.key(k)
		n := w.object()
		n.key("from")
		w.str(needs[k].From)
		n.key("select")
		w.str(needs[k].Select)
		n.end()
	}
	o.end()
}

func (w *canonWriter) retry(r *Retry) {
	o := w.object()
	if r.InitialBackoff != 0 {
		o.key("initial_backoff")
		w.duration(r.InitialBackoff)
	}
	if r.MaxAttempts != 0 {
		o.key("max_attempts")
		w.int(int64(r.MaxAttempts))
	}
	if r.MaxBackoff != 0 {
		o.key("max_backoff")
		w.duration(r.MaxBackoff)
	}
	if r.Multiplier != 0 {
		o.key("multiplier")
		w.number(r.Multiplier)
	}
	if r.OnWorkerFailed != nil {
		o.key("on_worker_failed")
		w.b = strconv.AppendBool(w.b, *r.OnWorkerFailed)
	}
	o.end()
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 orders object keys.
func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
