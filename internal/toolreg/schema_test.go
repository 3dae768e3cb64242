package toolreg

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRegistry_Register(t *testing.T) {
	ok := func(context.Context, Call) (Result, error) { return Result{}, nil }
	closed := `{"type":"object","properties":{},"additionalProperties":false}`
	tests := []struct {
		name    string
		tool    Tool
		wantErr string // substring; "" means success
	}{
		{"valid", Tool{Name: "read_file", Description: "d", Schema: echoSchema, Handler: ok}, ""},
		{"no properties", Tool{Name: "noargs", Description: "d", Schema: json.RawMessage(closed), Handler: ok}, ""},
		{"empty name", Tool{Name: "", Description: "d", Schema: json.RawMessage(closed), Handler: ok}, "want a name"},
		{"upper case name", Tool{Name: "Read", Description: "d", Schema: json.RawMessage(closed), Handler: ok}, "want a name"},
		{"name with dash", Tool{Name: "read-file", Description: "d", Schema: json.RawMessage(closed), Handler: ok}, "want a name"},
		{"long name", Tool{Name: strings.Repeat("a", MaxToolNameLen+1), Description: "d", Schema: json.RawMessage(closed), Handler: ok}, "want a name"},
		{"no description", Tool{Name: "t", Schema: json.RawMessage(closed), Handler: ok}, "empty description"},
		{"no handler", Tool{Name: "t", Description: "d", Schema: json.RawMessage(closed)}, "no handler"},
		{"invalid JSON", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":`), Handler: ok}, "not valid JSON"},
		{"not an object schema", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"string"}`), Handler: ok}, `"type": "object"`},
		{"open schema", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{}}`), Handler: ok}, "closed"},
		{"open schema explicit", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":true}`), Handler: ok}, "closed"},
		{"unknown keyword", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false,"patternProperties":{}}`), Handler: ok}, "patternProperties"},
		{"unsupported property keyword", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","pattern":"x"}},"additionalProperties":false}`), Handler: ok}, "pattern"},
		{"nested object", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"object"}},"additionalProperties":false}`), Handler: ok}, "not supported"},
		{"array without items", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"array"}},"additionalProperties":false}`), Handler: ok}, "items"},
		{"array of arrays", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"array","items":{"type":"array","items":{"type":"string"}}}},"additionalProperties":false}`), Handler: ok}, "arrays of arrays"},
		{"enum on integer", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","enum":["1"]}},"additionalProperties":false}`), Handler: ok}, `"enum" applies only to type string`},
		{"fractional minimum", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","minimum":0.5}},"additionalProperties":false}`), Handler: ok}, "integer"},
		{"min above max", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","minLength":3,"maxLength":2}},"additionalProperties":false}`), Handler: ok}, "above"},
		{"required undeclared", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{},"required":["a"],"additionalProperties":false}`), Handler: ok}, "not declared"},
		{"required twice", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","a"],"additionalProperties":false}`), Handler: ok}, "twice"},
		{"trailing data", Tool{Name: "t", Description: "d", Schema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false} {}`), Handler: ok}, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewRegistry().Register(tt.tool)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Register: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRegistry_RegisterDuplicate(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, tool("read_file", nil, Result{}, nil))
	err := r.Register(tool("read_file", nil, Result{}, nil))
	if !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("got %v, want ErrDuplicateTool", err)
	}
}

func TestObjectSchema_Validate(t *testing.T) {
	s, err := compileSchema(echoSchema)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args string
		want string // substring of the reason; "" means valid
	}{
		{"minimal", `{"path":"a"}`, ""},
		{"all", `{"path":"a/b","mode":"HEAD","free":"x","n":100,"big":-9223372036854775808,"x":1.5e3,"flag":false,"argv":["ls","-l"]}`, ""},
		{"whitespace", " \n{ \"path\" : \"a\" , \"n\" : 0 }\t", ""},
		{"escaped key", `{"p\u0061th":"a"}`, ""},
		{"escaped value within length", `{"path":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"}`, ""},
		{"empty", ``, "empty"},
		{"blank", `  `, "empty"},
		{"not JSON", `{"path":`, "not valid JSON"},
		{"array", `["path"]`, "a JSON array; want an object"},
		{"null", `null`, "a JSON null; want an object"},
		{"string", `"x"`, "a JSON string"},
		{"two objects", `{"path":"a"}{}`, "not valid JSON"},
		{"missing required", `{"n":1}`, `required property "path" is missing`},
		{"empty object", `{}`, `required property "path" is missing`},
		{"unknown property", `{"path":"a","extra":1}`, `unknown property "extra"`},
		{"case folded key", `{"PATH":"/etc/passwd"}`, `unknown property "PATH"`},
		{"long unknown key cut", `{"` + strings.Repeat("k", 500) + `":1}`, `…`},
		{"duplicate key", `{"path":"a","path":"b"}`, `"path" appears twice`},
		{"duplicate via escape", `{"path":"a","p\u0061th":"../x"}`, `"path" appears twice`},
		{"wrong type string", `{"path":1}`, `property "path": want string, got number`},
		{"null value", `{"path":"a","n":null}`, `want integer, got null`},
		{"integer fraction", `{"path":"a","n":1.0}`, "fraction"},
		{"integer exponent", `{"path":"a","n":1e2}`, "exponent"},
		{"integer overflow", `{"path":"a","big":9223372036854775808}`, "out of range"},
		{"number overflow", `{"path":"a","x":1e700}`, `property "x": want number, got a number out of range`},
		{"number overflow, negative", `{"path":"a","x":-1e400}`, "out of range"},
		{"integer below min", `{"path":"a","n":-1}`, "below the minimum 0"},
		{"integer above max", `{"path":"a","n":101}`, "above the maximum 100"},
		{"integer string", `{"path":"a","n":"5"}`, "want integer, got string"},
		{"number string", `{"path":"a","x":"5"}`, "want number, got string"},
		{"boolean string", `{"path":"a","flag":"true"}`, "want boolean, got string"},
		{"string too short", `{"path":""}`, "shorter than 1"},
		{"string too long", `{"path":"123456789"}`, "longer than 8"},
		{"enum miss", `{"path":"a","mode":"POST"}`, `not one of the allowed values "GET", "HEAD"`},
		{"enum escaped hit", `{"path":"a","mode":"G\u0045T"}`, ""},
		{"array wrong type", `{"path":"a","argv":"ls"}`, "want array, got string"},
		{"array item type", `{"path":"a","argv":["ls",1]}`, "item 1: want string, got number"},
		{"array item bound", `{"path":"a","argv":["toolong"]}`, "item 0: longer than 4"},
		{"array too short", `{"path":"a","argv":[]}`, "fewer than 1 items"},
		{"array too long", `{"path":"a","argv":["a","b","c","d"]}`, "more than 3 items"},
		{"object value", `{"path":{"a":1}}`, "want string, got object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.validate([]byte(tt.args))
			if tt.want == "" {
				if got != "" {
					t.Errorf("validate = %q, want valid", got)
				}
				return
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("validate = %q, want a reason containing %q", got, tt.want)
			}
		})
	}
}

// FuzzArgsValidate checks that validation never panics, and that arguments it accepts decode
// with encoding/json into the declared Go types with only declared keys, each once.
func FuzzArgsValidate(f *testing.F) {
	for _, seed := range []string{
		`{"path":"a"}`, `{"path":"a","n":5,"argv":["x"],"flag":true,"x":-0.5e-3,"mode":"GET"}`,
		`{"p\u0061th":"a"}`, `{"path":"a","path":"b"}`, `[]`, `{`, `{"path":"\ud800"}`, `{"big":-0}`,
		` { "argv" : [ "a" , "b" ] , "path" : "é" } `, `{"path":"a","n":1e400}`,
	} {
		f.Add([]byte(seed))
	}
	s, err := compileSchema(echoSchema)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		if s.validate(args) != "" {
			return
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(args, &raw); err != nil {
			t.Fatalf("accepted %q, but it is not a JSON object: %v", args, err)
		}
		keys := 0
		for k := range raw {
			if s.props[k] == nil {
				t.Fatalf("accepted %q with undeclared key %q", args, k)
			}
			keys++
		}
		type typed struct {
			Path *string  `json:"path"`
			Mode string   `json:"mode"`
			Free string   `json:"free"`
			N    int64    `json:"n"`
			Big  int64    `json:"big"`
			X    float64  `json:"x"`
			Flag bool     `json:"flag"`
			Argv []string `json:"argv"`
		}
		var v typed
		dec := json.NewDecoder(strings.NewReader(string(args)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("accepted %q, but it does not decode into the declared types: %v", args, err)
		}
		if v.Path == nil {
			t.Fatalf("accepted %q without the required path", args)
		}
		if v.N < 0 || v.N > 100 {
			t.Fatalf("accepted %q with n=%d outside [0,100]", args, v.N)
		}
		if v.Mode != "" && v.Mode != "GET" && v.Mode != "HEAD" {
			t.Fatalf("accepted %q with mode %q", args, v.Mode)
		}
		if _, dup := raw["argv"]; dup && (len(v.Argv) < 1 || len(v.Argv) > 3) {
			t.Fatalf("accepted %q with %d argv items", args, len(v.Argv))
		}
		// A duplicate key collapses in the map; count the keys as written with a token decoder.
		dec = json.NewDecoder(strings.NewReader(string(args)))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for dec.More() {
			if _, err := dec.Token(); err != nil {
				t.Fatal(err)
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != keys {
			t.Fatalf("accepted %q with a duplicate key (%d keys, %d distinct)", args, n, keys)
		}
	})
}
