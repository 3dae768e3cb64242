package toolreg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agora-dev/agora/internal/grant"
)

func TestRegistry_For(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r,
		tool("read_file", nil, Result{}, nil),
		tool("write_file", nil, Result{}, nil),
		tool("list_files", nil, Result{}, nil),
	)
	g := grant.Set{Tools: []string{"read_file", "list_files", "search_files", "read_file"}}
	v := r.For("d1", testRole, g, nopAuditor{})

	var got []string
	for _, info := range v.List() {
		got = append(got, info.Name)
	}
	if diff := cmp.Diff([]string{"list_files", "read_file"}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	// Later registrations and edits of the grant do not reach an existing view.
	g.Tools[0] = "write_file"
	mustRegister(t, r, tool("search_files", nil, Result{}, nil))
	if _, ok := v.Lookup("write_file"); ok {
		t.Error("view changed with its caller's grant slice")
	}
	if _, ok := v.Lookup("search_files"); ok {
		t.Error("view gained a tool registered after For")
	}
	if diff := cmp.Diff([]string{"read_file", "list_files", "search_files", "read_file"}, v.Grants().Tools); diff != "" {
		t.Errorf("Grants().Tools (-want +got):\n%s", diff)
	}
}

func TestView_ListAndCallUseTheSameCheck(t *testing.T) {
	r := NewRegistry()
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		mustRegister(t, r, tool(n, nil, Result{}, nil))
	}
	v := r.For("d1", testRole, grant.Set{Tools: []string{"b", "d", "zz"}}, nopAuditor{})
	listed := map[string]bool{}
	for _, info := range v.List() {
		listed[info.Name] = true
	}
	for _, n := range append(names, "zz", "") {
		_, looked := v.Lookup(n)
		_, err := v.Call(t.Context(), n, json.RawMessage(`{"path":"x"}`))
		called := !errors.Is(err, ErrToolNotPermitted)
		if listed[n] != looked || looked != called {
			t.Errorf("tool %q: listed %v, Lookup %v, Call permitted %v; want all equal", n, listed[n], looked, called)
		}
	}
}

func TestView_Call(t *testing.T) {
	planted := "hunter2-planted-secret"
	redact := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(planted), []byte("[REDACTED]")) }
	hashOf := func(s string) string {
		sum := sha256.Sum256(redact([]byte(s)))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	handlerErr := errors.New("disk on fire near " + planted)

	tests := []struct {
		name         string
		tool         string
		args         string
		res          Result
		err          error
		wantRan      bool
		wantErr      func(error) bool
		wantDecision string
		wantReason   string
	}{
		{
			name: "allowed", tool: "read_file", args: `{"path":"` + planted[:8] + `"}`,
			res: Result{Content: "ok"}, wantRan: true,
			wantErr: func(err error) bool { return err == nil }, wantDecision: DecisionAllowed, wantReason: ReasonGranted,
		},
		{
			name: "registered but not granted", tool: "write_file", args: `{"path":"x","free":"` + planted + `"}`,
			wantErr:      isNotPermitted("write_file"),
			wantDecision: DecisionDenied, wantReason: ReasonNotGranted,
		},
		{
			name: "granted but not registered", tool: "search_files", args: `{}`,
			wantErr:      isNotPermitted("search_files"),
			wantDecision: DecisionDenied, wantReason: ReasonNotRegistered,
		},
		{
			name: "unknown tool", tool: "drop_table", args: `{}`,
			wantErr:      isNotPermitted("drop_table"),
			wantDecision: DecisionDenied, wantReason: ReasonUnknownTool,
		},
		{
			name: "invalid name", tool: "Read File\x00", args: `{}`,
			wantErr:      isNotPermitted("Read File\x00"),
			wantDecision: DecisionDenied, wantReason: ReasonInvalidName,
		},
		{
			name: "invalid arguments", tool: "read_file", args: `{"path":"x","free":"` + planted + `","n":"1"}`,
			wantErr: func(err error) bool {
				var ae *ArgsError
				return errors.As(err, &ae) && ae.Tool == "read_file" && !strings.Contains(err.Error(), planted)
			},
			wantDecision: DecisionError, wantReason: `invalid arguments: property "n": want integer, got string`,
		},
		{
			name: "handler denies", tool: "read_file", args: `{"path":"x"}`,
			err: &DeniedError{Tool: "read_file", Reason: "path outside the workspace"}, wantRan: true,
			wantErr:      func(err error) bool { var de *DeniedError; return errors.As(err, &de) },
			wantDecision: DecisionDenied, wantReason: "path outside the workspace",
		},
		{
			name: "handler needs input", tool: "read_file", args: `{"path":"x"}`,
			err: &NeedsInput{Question: "which?"}, wantRan: true,
			wantErr:      func(err error) bool { var ni *NeedsInput; return errors.As(err, &ni) && ni.Question == "which?" },
			wantDecision: DecisionAllowed, wantReason: ReasonNeedsInput,
		},
		{
			name: "handler fails", tool: "read_file", args: `{"path":"x"}`,
			err: handlerErr, wantRan: true,
			wantErr:      func(err error) bool { return err == handlerErr },
			wantDecision: DecisionError, wantReason: "tool error: disk on fire near [REDACTED]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			ran := 0
			mustRegister(t, r, tool("read_file", &ran, tt.res, tt.err), tool("write_file", &ran, tt.res, tt.err))
			rec := &recorder{}
			v := r.For("dispatch-1", testRole, grant.Set{Tools: []string{"read_file", "search_files"}}, rec, WithRedactor(redact))

			res, err := v.Call(t.Context(), tt.tool, json.RawMessage(tt.args))
			if !tt.wantErr(err) {
				t.Fatalf("Call error = %v (%T)", err, err)
			}
			if res != tt.res && err == nil {
				t.Errorf("Call result = %+v, want %+v", res, tt.res)
			}
			if (ran > 0) != tt.wantRan {
				t.Errorf("handler ran %d times, want ran=%v", ran, tt.wantRan)
			}
			d := rec.only(t)
			wantTool := tt.tool
			if !validName(tt.tool) {
				wantTool = cut(tt.tool, MaxToolNameLen)
			}
			want := Decision{DispatchID: "dispatch-1", Role: testRole, Tool: wantTool,
				Decision: tt.wantDecision, Reason: tt.wantReason, ArgsHash: hashOf(tt.args)}
			if diff := cmp.Diff(want, d, cmpopts.IgnoreFields(Decision{}, "Duration")); diff != "" {
				t.Errorf("audit (-want +got):\n%s", diff)
			}
			if d.Duration <= 0 {
				t.Errorf("audit duration %v, want > 0", d.Duration)
			}
			if strings.Contains(d.Reason+d.ArgsHash+d.Tool, planted) {
				t.Errorf("audit record %+v holds the planted secret", d)
			}
		})
	}
}

func isNotPermitted(tool string) func(error) bool {
	return func(err error) bool {
		var tnp *ToolNotPermitted
		if !errors.As(err, &tnp) || !errors.Is(err, ErrToolNotPermitted) {
			return false
		}
		want := `tool ` + strconv.Quote(tool) + ` is not permitted for role "` + testRole + `"`
		return tnp.Role == testRole && err.Error() == want
	}
}

func TestView_CallWithoutRedactorHashesRawArgs(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, tool("read_file", nil, Result{}, nil))
	rec := &recorder{}
	v := r.For("d", testRole, grant.Set{Tools: []string{"read_file"}}, rec)
	args := `{"path":"abc"}`
	if _, err := v.Call(t.Context(), "read_file", json.RawMessage(args)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(args))
	if got, want := rec.only(t).ArgsHash, "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Errorf("got hash %s, want %s", got, want)
	}
}

func TestView_CallArgsTooLarge(t *testing.T) {
	r := NewRegistry()
	ran := 0
	mustRegister(t, r, tool("read_file", &ran, Result{}, nil))
	rec := &recorder{}
	v := r.For("d", testRole, grant.Set{Tools: []string{"read_file"}}, rec)
	big := make([]byte, MaxArgsSize+1)
	_, err := v.Call(t.Context(), "read_file", big)
	var ae *ArgsError
	if !errors.As(err, &ae) || ae.Reason != ReasonArgsTooLarge {
		t.Fatalf("got %v, want ArgsError %q", err, ReasonArgsTooLarge)
	}
	d := rec.only(t)
	if d.Decision != DecisionError || d.Reason != ReasonArgsTooLarge || !strings.HasPrefix(d.ArgsHash, "sha256:") || ran != 0 {
		t.Errorf("got %+v (handler ran %d), want an error decision with a hash and no run", d, ran)
	}
}

func TestView_CallPanicIsAudited(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, Tool{Name: "boom", Description: "d", Schema: echoSchema,
		Handler: func(context.Context, Call) (Result, error) { panic("kaboom") }})
	rec := &recorder{}
	v := r.For("d", testRole, grant.Set{Tools: []string{"boom"}}, rec)
	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		_, _ = v.Call(t.Context(), "boom", json.RawMessage(`{"path":"x"}`))
	}()
	if d := rec.only(t); d.Decision != DecisionError || d.Reason != ReasonPanicked || d.Tool != "boom" {
		t.Errorf("got %+v, want an error decision for the panic", d)
	}
}

func TestView_CallPassesIdentity(t *testing.T) {
	r := NewRegistry()
	var got Call
	mustRegister(t, r, Tool{Name: "who", Description: "d", Schema: echoSchema,
		Handler: func(_ context.Context, c Call) (Result, error) { got = c; return Result{}, nil }})
	g := grant.Set{Tools: []string{"who"}, Commands: []string{"echo *"}, Egress: grant.MustEgressRules("api.example.com")}
	v := r.For("d-7", testRole, g, nopAuditor{})
	if _, err := v.Call(t.Context(), "who", json.RawMessage(`{"path":"x"}`)); err != nil {
		t.Fatal(err)
	}
	want := Call{Args: json.RawMessage(`{"path":"x"}`), Grants: g, DispatchID: "d-7", Role: testRole}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handler call (-want +got):\n%s", diff)
	}
}

func TestView_CancelledContextIsStillAudited(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, tool("read_file", nil, Result{}, nil))
	rec := &recorder{} // panics when handed a cancelled context
	v := r.For("d", testRole, grant.Set{Tools: []string{"read_file"}}, rec)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _ = v.Call(ctx, "read_file", json.RawMessage(`{"path":"x"}`))
	_, _ = v.Call(ctx, "write_file", json.RawMessage(`{}`))
	if n := len(rec.all()); n != 2 {
		t.Errorf("got %d decisions, want 2", n)
	}
}

func TestRegistry_ForFailsClosed(t *testing.T) {
	r := NewRegistry()
	ran := 0
	mustRegister(t, r, tool("read_file", &ran, Result{}, nil))
	g := grant.Set{Tools: []string{"read_file"}}

	t.Run("no role", func(t *testing.T) {
		rec := &recorder{}
		v := r.For("d", "", g, rec)
		if l := v.List(); len(l) != 0 {
			t.Errorf("List = %v, want none", l)
		}
		_, err := v.Call(t.Context(), "read_file", json.RawMessage(`{"path":"x"}`))
		if !errors.Is(err, ErrToolNotPermitted) {
			t.Errorf("got %v, want ToolNotPermitted", err)
		}
		if d := rec.only(t); d.Decision != DecisionDenied || !strings.HasPrefix(d.Reason, ReasonBrokenView) {
			t.Errorf("got %+v, want a denial naming the broken view", d)
		}
	})
	t.Run("no auditor", func(t *testing.T) {
		v := r.For("d", testRole, g, nil)
		if l := v.List(); len(l) != 0 {
			t.Errorf("List = %v, want none", l)
		}
		if _, err := v.Call(t.Context(), "read_file", json.RawMessage(`{"path":"x"}`)); !errors.Is(err, ErrToolNotPermitted) {
			t.Errorf("got %v, want ToolNotPermitted", err)
		}
	})
	if ran != 0 {
		t.Errorf("handler ran %d times through a broken view", ran)
	}
}

func TestView_ListIsACopy(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, tool("read_file", nil, Result{}, nil))
	v := r.For("d", testRole, grant.Set{Tools: []string{"read_file"}}, nopAuditor{})
	l := v.List()
	l[0].Schema[0] = 'X'
	if v.List()[0].Schema[0] != '{' {
		t.Error("changing a listed schema changed the view")
	}
	if !json.Valid(v.List()[0].Schema) {
		t.Error("listed schema is not valid JSON")
	}
}
