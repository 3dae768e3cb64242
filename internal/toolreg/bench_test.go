package toolreg

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
)

func benchView(tb testing.TB) *View {
	tb.Helper()
	r := NewRegistry()
	for _, n := range []string{"read_file", "write_file", "list_files", "search_files", "run_command", "http_fetch", "ask_human"} {
		mustRegister(tb, r, Tool{Name: n, Description: "d", Schema: echoSchema,
			Handler: func(context.Context, Call) (Result, error) { return Result{}, nil }})
	}
	g := grant.Set{Tools: []string{"read_file", "list_files", "search_files"}}
	return r.For("dispatch-1", testRole, g, nopAuditor{})
}

var benchArgs = json.RawMessage(`{"path":"src/a.go","n":10,"flag":true,"argv":["ls","-l"]}`)

// BenchmarkViewCall measures the view's own work for one allowed call: the access check,
// argument validation, the args hash and the audit hand-off (no-op handler and auditor).
func BenchmarkViewCall(b *testing.B) {
	v := benchView(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Call(ctx, "read_file", benchArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkViewCallDenied measures a refused call (not granted), audited.
func BenchmarkViewCallDenied(b *testing.B) {
	v := benchView(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Call(ctx, "write_file", benchArgs); err == nil {
			b.Fatal("write_file allowed")
		}
	}
}

// BenchmarkViewLookup measures the access check alone.
func BenchmarkViewLookup(b *testing.B) {
	v := benchView(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := v.Lookup("search_files"); !ok {
			b.Fatal("search_files not found")
		}
		if _, ok := v.Lookup("write_file"); ok {
			b.Fatal("write_file found")
		}
	}
}

func TestView_LookupDoesNotAllocate(t *testing.T) {
	v := benchView(t)
	allocs := testing.AllocsPerRun(1000, func() {
		v.Lookup("read_file")
		v.Lookup("write_file")
	})
	if allocs != 0 {
		t.Errorf("Lookup allocates %v times per run, want 0", allocs)
	}
}

func TestObjectSchema_ValidateDoesNotAllocate(t *testing.T) {
	v := benchView(t)
	e, _ := v.lookup("read_file")
	allocs := testing.AllocsPerRun(1000, func() {
		if r := e.schema.validate(benchArgs); r != "" {
			t.Fatal(r)
		}
	})
	if allocs != 0 {
		t.Errorf("validate allocates %v times per run, want 0", allocs)
	}
}
