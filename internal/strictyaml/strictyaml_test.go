package strictyaml_test

import (
	"errors"
	"net/netip"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	yaml "go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/strictyaml"
)

type task struct {
	Name      string        `yaml:"name"`
	DependsOn []string      `yaml:"depends_on"`
	Timeout   time.Duration `yaml:"timeout"`
	Retry     int           `yaml:"retry"`
	Enabled   bool          `yaml:"enabled"`
	Input     any           `yaml:"input"`
}

type plan struct {
	Version int               `yaml:"version"`
	Tasks   []task            `yaml:"tasks"`
	Labels  map[string]string `yaml:"labels"`
	Addr    netip.Addr        `yaml:"addr"`
	Ratio   float64           `yaml:"ratio"`
	Small   uint8             `yaml:"small"`
	Tiny    int8              `yaml:"tiny"`
	Ptr     *int              `yaml:"ptr"`
	Lock    lock              `yaml:"lock"`
	Hidden  string            `yaml:"-"`
	Plain   string            // no tag: matched as "plain"
	secret  string
}

// lock decodes from a bare string or a mapping, as a custom Unmarshaler.
type lock struct {
	Name string
	Mode string
}

func (l *lock) UnmarshalStrictYAML(d *strictyaml.Decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode {
		l.Name, l.Mode = n.Value, "exclusive"
		return
	}
	var m struct {
		Name string `yaml:"name"`
		Mode string `yaml:"mode"`
	}
	d.Decode(n, reflect.ValueOf(&m).Elem(), path)
	if m.Mode != "shared" && m.Mode != "exclusive" {
		d.Errorf(n, path+".mode", "want shared or exclusive, got %q", m.Mode)
	}
	l.Name, l.Mode = m.Name, m.Mode
}

func decodeErrs(t *testing.T, src string, out any) strictyaml.Errors {
	t.Helper()
	_, err := strictyaml.Decode("f.yaml", []byte(src), out)
	if err == nil {
		t.Fatalf("Decode(%q) = nil error, want errors", src)
	}
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Decode error is %T, want strictyaml.Errors: %v", err, err)
	}
	return es
}

func TestDecode_Valid(t *testing.T) {
	src := `
version: 1
tasks:
  - name: build
    depends_on: [fetch]
    timeout: 1m30s
    retry: 1_000
    enabled: true
    input:
      n: 3
      f: 1.5
      s: text
      b: false
      nothing: ~
      list: [1, "two"]
  - name: fetch
labels: {team: infra}
addr: 192.0.2.1
ratio: 2
small: 255
tiny: -128
ptr: 7
lock: db
plain: yes
`
	var got plan
	if _, err := strictyaml.Decode("f.yaml", []byte(src), &got); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	seven := 7
	want := plan{
		Version: 1,
		Tasks: []task{
			{
				Name: "build", DependsOn: []string{"fetch"}, Timeout: 90 * time.Second, Retry: 1000, Enabled: true,
				Input: map[string]any{
					"n": int64(3), "f": 1.5, "s": "text", "b": false, "nothing": nil,
					"list": []any{int64(1), "two"},
				},
			},
			{Name: "fetch"},
		},
		Labels: map[string]string{"team": "infra"},
		Addr:   netip.MustParseAddr("192.0.2.1"),
		Ratio:  2,
		Small:  255,
		Tiny:   -128,
		Ptr:    &seven,
		Lock:   lock{Name: "db", Mode: "exclusive"},
		Plain:  "yes",
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(plan{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Decode mismatch (-want +got):\n%s", diff)
	}
}

func TestDecode_Errors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want strictyaml.Errors
	}{
		{
			name: "unknown field lists known fields",
			src:  "version: 1\nnmae: x\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "nmae",
				Msg: `unknown field "nmae"; known fields: addr, labels, lock, plain, ptr, ratio, small, tasks, tiny, version`}},
		},
		{
			name: "unknown field in a list item",
			src:  "tasks:\n  - name: a\n  - name: b\n    retyr: 2\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 4, Path: "tasks[1].retyr",
				Msg: `unknown field "retyr"; known fields: depends_on, enabled, input, name, retry, timeout`}},
		},
		{
			name: "hidden field is unknown",
			src:  "hidden: x\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "hidden",
				Msg: `unknown field "hidden"; known fields: addr, labels, lock, plain, ptr, ratio, small, tasks, tiny, version`}},
		},
		{
			name: "duplicate key in a struct",
			src:  "version: 1\nratio: 1\nversion: 2\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 3, Path: "version", Msg: "duplicate key (first at line 1)"}},
		},
		{
			name: "duplicate key in a map",
			src:  "labels:\n  a: x\n  b: y\n  a: z\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 4, Path: "labels.a", Msg: "duplicate key (first at line 2)"}},
		},
		{
			name: "duplicate key in any",
			src:  "tasks:\n  - input:\n      k: 1\n      k: 2\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 4, Path: "tasks[0].input.k", Msg: "duplicate key"}},
		},
		{
			name: "anchor refused",
			src:  "labels: &l {a: b}\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "labels", Msg: "anchors and aliases are not allowed"}},
		},
		{
			name: "alias refused",
			src:  "tasks:\n  - name: a\n    depends_on: &d [x]\n  - name: b\n    depends_on: *d\n",
			want: strictyaml.Errors{
				{File: "f.yaml", Line: 3, Path: "tasks[0].depends_on", Msg: "anchors and aliases are not allowed"},
				{File: "f.yaml", Line: 5, Path: "tasks[1].depends_on", Msg: "anchors and aliases are not allowed"},
			},
		},
		{
			name: "alias in any refused",
			src:  "tasks:\n  - input: &i {a: 1}\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].input", Msg: "anchors and aliases are not allowed"}},
		},
		{
			name: "anchored key refused",
			src:  "&k version: 1\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "", Msg: "anchors and aliases are not allowed"}},
		},
		{
			name: "merge key refused",
			src:  "base: &b {version: 1}\n<<: *b\n",
			want: strictyaml.Errors{
				{File: "f.yaml", Line: 1, Path: "base", Msg: `unknown field "base"; known fields: addr, labels, lock, plain, ptr, ratio, small, tasks, tiny, version`},
				{File: "f.yaml", Line: 2, Path: "<<", Msg: `unknown field "<<"; known fields: addr, labels, lock, plain, ptr, ratio, small, tasks, tiny, version`},
			},
		},
		{
			name: "list where a string belongs",
			src:  "tasks:\n  - name: [a]\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].name", Msg: "want a string, got a list"}},
		},
		{
			name: "mapping where a string belongs",
			src:  "tasks:\n  - name: {a: b}\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].name", Msg: "want a string, got a mapping"}},
		},
		{
			name: "null where a string belongs",
			src:  "tasks:\n  - name: ~\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].name", Msg: "want a string, got null"}},
		},
		{
			name: "string where a list belongs",
			src:  "tasks:\n  - depends_on: fetch\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].depends_on", Msg: `want a list, got "fetch"`}},
		},
		{
			name: "list where a mapping belongs",
			src:  "labels: [a]\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "labels", Msg: "want a mapping, got a list"}},
		},
		{
			name: "string where a struct belongs",
			src:  "tasks: [build]\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "tasks[0]", Msg: `want a mapping, got "build"`}},
		},
		{
			name: "yes is not a bool",
			src:  "tasks:\n  - enabled: yes\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].enabled", Msg: `want true or false, got "yes"`}},
		},
		{
			name: "True is not a bool",
			src:  "tasks:\n  - enabled: True\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].enabled", Msg: `want true or false, got "True"`}},
		},
		{
			name: "quoted integer",
			src:  "version: \"1\"\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "version", Msg: `want an integer, got "1"`}},
		},
		{
			name: "float for an integer",
			src:  "version: 1.5\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "version", Msg: `want an integer, got "1.5"`}},
		},
		{
			name: "hex integer",
			src:  "version: 0x10\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "version", Msg: `want an integer, got "0x10"`}},
		},
		{
			name: "int8 overflow",
			src:  "tiny: 128\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "tiny", Msg: `want an integer, got "128"`}},
		},
		{
			name: "uint8 overflow",
			src:  "small: 256\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "small", Msg: `want a non-negative integer, got "256"`}},
		},
		{
			name: "negative uint",
			src:  "small: -1\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "small", Msg: `want a non-negative integer, got "-1"`}},
		},
		{
			name: "infinite float",
			src:  "ratio: .inf\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "ratio", Msg: `want a number, got ".inf"`}},
		},
		{
			name: "string float",
			src:  "ratio: \"2\"\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "ratio", Msg: `want a number, got "2"`}},
		},
		{
			name: "duration without unit",
			src:  "tasks:\n  - timeout: 30\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].timeout", Msg: `want a duration such as 30s or 5m, got "30"`}},
		},
		{
			name: "negative duration",
			src:  "tasks:\n  - timeout: -5s\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].timeout", Msg: `want a duration such as 30s or 5m, got "-5s"`}},
		},
		{
			name: "duration as a list",
			src:  "tasks:\n  - timeout: [1s]\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "tasks[0].timeout", Msg: "want a duration such as 30s or 5m, got a list"}},
		},
		{
			name: "text unmarshaler error",
			src:  "addr: 300.1.1.1\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "addr",
				Msg: `ParseAddr("300.1.1.1"): IPv4 field has value >255`}},
		},
		{
			name: "text unmarshaler wants a string",
			src:  "addr: {a: b}\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "addr", Msg: "want a string, got a mapping"}},
		},
		{
			name: "custom unmarshaler error",
			src:  "lock: {name: db, mode: rw}\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "lock.mode", Msg: `want shared or exclusive, got "rw"`}},
		},
		{
			name: "any refuses non-finite numbers and odd tags",
			src:  "tasks:\n  - input:\n      a: .nan\n      b: !!binary aGVsbG8=\n      c: !!int 99999999999999999999\n",
			want: strictyaml.Errors{
				{File: "f.yaml", Line: 3, Path: "tasks[0].input.a", Msg: `want a finite number, got ".nan"`},
				{File: "f.yaml", Line: 4, Path: "tasks[0].input.b", Msg: `unsupported type !!binary, got "aGVsbG8="`},
				{File: "f.yaml", Line: 5, Path: "tasks[0].input.c", Msg: `integer out of range, got "99999999999999999999"`},
			},
		},
		{
			name: "mapping keys must be scalars",
			src:  "labels:\n  [a]: b\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Path: "labels", Msg: "keys must be plain strings"}},
		},
		{
			name: "root is not a mapping",
			src:  "- a\n- b\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 1, Path: "", Msg: "want a mapping, got a list"}},
		},
		{
			name: "a second document is refused",
			src:  "version: 1\n---\nversion: 2\n",
			want: strictyaml.Errors{{File: "f.yaml", Line: 2, Msg: "invalid YAML: a file holds one YAML document; found a second"}},
		},
		{
			name: "every error at once in document order",
			src: `version: one
tasks:
  - name: a
    retry: many
  - name: [b]
    timeout: soon
    extra: 1
labels:
  x: 1
  x: 2
`,
			want: strictyaml.Errors{
				{File: "f.yaml", Line: 1, Path: "version", Msg: `want an integer, got "one"`},
				{File: "f.yaml", Line: 4, Path: "tasks[0].retry", Msg: `want an integer, got "many"`},
				{File: "f.yaml", Line: 5, Path: "tasks[1].name", Msg: "want a string, got a list"},
				{File: "f.yaml", Line: 6, Path: "tasks[1].timeout", Msg: `want a duration such as 30s or 5m, got "soon"`},
				{File: "f.yaml", Line: 7, Path: "tasks[1].extra",
					Msg: `unknown field "extra"; known fields: depends_on, enabled, input, name, retry, timeout`},
				{File: "f.yaml", Line: 10, Path: "labels.x", Msg: "duplicate key (first at line 9)"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p plan
			got := decodeErrs(t, tt.src, &p)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecode_InvalidYAML(t *testing.T) {
	tests := []struct {
		name, src, msg string
	}{
		{"bad indentation", "version: 1\nlabels:\n  a: b\n c: d\n", "invalid YAML: did not find expected key"},
		{"tab indentation", "version: 1\nlabels:\n\ta: b\n", "invalid YAML: found character that cannot start any token"},
		{"unclosed flow", "version: 1\nlabels: {a: b\n", "invalid YAML: did not find expected ',' or '}'"},
		{"broken second document", "version: 1\n---\n: : :\n\t\n", "invalid YAML: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p plan
			es := decodeErrs(t, tt.src, &p)
			if len(es) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(es), es)
			}
			// go.yaml.in/yaml/v3 reports parser errors at the line of the enclosing
			// construct, so only a plausible line is asserted.
			if es[0].File != "f.yaml" || es[0].Line < 1 || !strings.HasPrefix(es[0].Msg, tt.msg) {
				t.Errorf("got %+v, want f.yaml, a line and a message starting %q", es[0], tt.msg)
			}
		})
	}
}

func TestErrors_Error(t *testing.T) {
	es := strictyaml.Errors{
		{File: "m.yaml", Line: 3, Path: "tasks[1].name", Msg: "want a string, got a list"},
		{File: "m.yaml", Msg: "invalid YAML: something"},
		{Line: 2, Msg: "no file"},
		{Path: "p", Msg: "only a path"},
	}
	want := "m.yaml:3: tasks[1].name: want a string, got a list\n" +
		"m.yaml: invalid YAML: something\n" +
		"2: no file\n" +
		"p: only a path"
	if got := es.Error(); got != want {
		t.Errorf("Errors.Error() =\n%s\nwant\n%s", got, want)
	}
}

func TestDecode_Empty(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# only a comment\n", "---\n", "~\n"} {
		t.Run(src, func(t *testing.T) {
			p := plan{Version: 9, Plain: "kept"}
			pos, err := strictyaml.Decode("f.yaml", []byte(src), &p)
			if err != nil {
				t.Fatalf("Decode(%q): %v", src, err)
			}
			if p.Version != 9 || p.Plain != "kept" {
				t.Errorf("Decode(%q) changed the defaults: %+v", src, p)
			}
			if pos == nil {
				t.Errorf("Decode(%q) returned nil Positions", src)
			}
		})
	}
}

func TestDecode_KeepsDefaultsForAbsentFields(t *testing.T) {
	p := plan{Version: 1, Ratio: 0.5, Labels: map[string]string{"keep": "me"}}
	if _, err := strictyaml.Decode("f.yaml", []byte("labels: {add: x}\nratio: ~\n"), &p); err == nil {
		t.Fatalf("ratio: ~ decoded into a float without error")
	}
	p = plan{Version: 1, Labels: map[string]string{"keep": "me"}}
	if _, err := strictyaml.Decode("f.yaml", []byte("labels: {add: x}\n"), &p); err != nil {
		t.Fatal(err)
	}
	want := plan{Version: 1, Labels: map[string]string{"keep": "me", "add": "x"}}
	if diff := cmp.Diff(want, p, cmp.AllowUnexported(plan{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestDecode_NullPointer(t *testing.T) {
	one := 1
	p := plan{Ptr: &one}
	if _, err := strictyaml.Decode("f.yaml", []byte("ptr: null\n"), &p); err != nil {
		t.Fatal(err)
	}
	if p.Ptr != nil {
		t.Errorf("ptr: null left Ptr = %v, want nil", *p.Ptr)
	}
}

func TestDecode_Inline(t *testing.T) {
	type Base struct {
		Name string `yaml:"name"`
	}
	type withInline struct {
		Base `yaml:",inline"`
		Size int `yaml:"size"`
	}
	var got withInline
	if _, err := strictyaml.Decode("f.yaml", []byte("name: n\nsize: 2\n"), &got); err != nil {
		t.Fatal(err)
	}
	if want := (withInline{Base: Base{Name: "n"}, Size: 2}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestDecode_UnsupportedTypes(t *testing.T) {
	var v struct {
		C  complex128      `yaml:"c"`
		M  map[int]string  `yaml:"m"`
		Ch chan int        `yaml:"ch"`
		A  [2]int          `yaml:"a"`
		F  func()          `yaml:"f"`
		OK map[string]bool `yaml:"ok"`
	}
	es := decodeErrs(t, "c: 1\nm: {1: a}\nch: 1\na: [1, 2]\nf: x\nok: {x: true}\n", &v)
	var paths []string
	for _, e := range es {
		if !strings.HasPrefix(e.Msg, "cannot decode into ") {
			t.Errorf("error %v: want a cannot decode into message", e)
		}
		paths = append(paths, e.Path)
	}
	if diff := cmp.Diff([]string{"c", "m", "ch", "a", "f"}, paths); diff != "" {
		t.Errorf("paths mismatch (-want +got):\n%s", diff)
	}
	if !v.OK["x"] {
		t.Errorf("later valid field not decoded: %+v", v.OK)
	}
}

func TestPositions_Line(t *testing.T) {
	src := "version: 1\ntasks:\n  - name: a\n  - name: b\n    depends_on:\n      - a\n"
	var p plan
	pos, err := strictyaml.Decode("m.yaml", []byte(src), &p)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want int
	}{
		{"version", 1},
		{"tasks", 2},
		{"tasks[0]", 3},
		{"tasks[1].name", 4},
		{"tasks[1].depends_on[0]", 6},
		{"tasks[1].retry", 4},           // absent: falls back to tasks[1]
		{"tasks[1].depends_on[7].x", 5}, // absent: falls back to tasks[1].depends_on
		{"tasks[5].name", 2},            // absent: falls back to tasks
		{"nothing.at.all", 1},           // falls back to the document
		{"", 1},                         // the document
	}
	for _, tt := range tests {
		if got := pos.Line(tt.path); got != tt.want {
			t.Errorf("Line(%q) = %d, want %d", tt.path, got, tt.want)
		}
	}
	if got, want := pos.Errorf("tasks[1].retry", "too %s", "many"),
		(strictyaml.Error{File: "m.yaml", Line: 4, Path: "tasks[1].retry", Msg: "too many"}); got != want {
		t.Errorf("Errorf = %+v, want %+v", got, want)
	}
	var nilPos *strictyaml.Positions
	if got := nilPos.Line("x"); got != 0 {
		t.Errorf("nil Positions Line = %d, want 0", got)
	}
	if got := nilPos.Errorf("x", "m"); got != (strictyaml.Error{Path: "x", Msg: "m"}) {
		t.Errorf("nil Positions Errorf = %+v", got)
	}
}

func TestDecode_Limits(t *testing.T) {
	deepList := strings.Repeat("[", 101) + strings.Repeat("]", 101)
	okList := strings.Repeat("[", 90) + strings.Repeat("]", 90) // plus the levels above input
	tests := []struct {
		name string
		src  string
		want string // substring of the single error; "" for success
	}{
		{"deep free-form value", "tasks:\n  - input: " + deepList + "\n", "nested more than 100 levels deep"},
		{"deep typed value", "nest: " + deepList + "\n", "nested more than 100 levels deep"},
		{"nesting within the limit", "tasks:\n  - input: " + okList + "\n", ""},
		// YAML itself caps implicit keys at 1024 characters; explicit ones ("? key") are not.
		{"long key in a map", "labels:\n  ? " + strings.Repeat("k", 1025) + "\n  : v\n", "key of 1025 bytes is longer than 1024"},
		{"long key in a free-form value", "tasks:\n  - input:\n      ? " + strings.Repeat("k", 1025) + "\n      : v\n", "key of 1025 bytes is longer than 1024"},
		{"key at the limit", "labels:\n  ? " + strings.Repeat("k", 1024) + "\n  : v\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p struct {
				Tasks  []task            `yaml:"tasks"`
				Labels map[string]string `yaml:"labels"`
				Nest   nest              `yaml:"nest"`
			}
			_, err := strictyaml.Decode("f.yaml", []byte(tt.src), &p)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			var es strictyaml.Errors
			if !errors.As(err, &es) || len(es) != 1 || !strings.Contains(es[0].Msg, tt.want) {
				t.Errorf("Decode = %v, want one error containing %q", err, tt.want)
			}
		})
	}
}

// nest is a recursive type, so typed decoding can nest as deep as the document does.
type nest []nest

func TestDecode_StopsAfterManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("tasks:\n")
	for range 500 {
		b.WriteString("  - retry: x\n")
	}
	var p plan
	es := decodeErrs(t, b.String(), &p)
	if len(es) != 101 {
		t.Fatalf("got %d errors, want 100 and a stop notice", len(es))
	}
	if last := es[100]; last.Msg != "more than 100 errors; stopping here" || last.Line != 102 {
		t.Errorf("last error = %+v", last)
	}
}

// A value whose nodes sit under a long path must not cost time or memory per node times the
// path's length: 1,000-byte keys over 200,000 list items stay linear.
func TestDecode_WideValueUnderLongPathIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: decodes a 400 KB document; run without -short")
	}
	var b strings.Builder
	b.WriteString("tasks:\n  - input:\n")
	key := strings.Repeat("k", 1000)
	for range 50 {
		b.WriteString("      " + key + ":\n")
		b.WriteString("        [" + strings.Repeat("1,", 4000) + "1]\n")
	}
	// Keys must differ: make each unique by prefixing its index.
	src := b.String()
	var sb strings.Builder
	for i, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(line, "      k") {
			line = "      " + strconv.Itoa(i) + line[6:]
		}
		sb.WriteString(line + "\n")
	}
	var p plan
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := strictyaml.Decode("f.yaml", []byte(sb.String()), &p); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	runtime.ReadMemStats(&after)
	// A path string per item would be 200,000 x 1 KB = 200 MB on its own.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("decoding %d bytes allocated %d MB", sb.Len(), alloc>>20)
	if alloc > 100<<20 {
		t.Errorf("decoding %d bytes allocated %d MB, want under 100 MB", sb.Len(), alloc>>20)
	}
	in := p.Tasks[0].Input.(map[string]any)
	if len(in) != 50 {
		t.Errorf("decoded %d keys, want 50", len(in))
	}
}
