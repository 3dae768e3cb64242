package strictyaml

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// jTask and jDoc hold every kind of target Decode handles: text types, durations, pointers,
// lists, string-keyed maps, free-form values, an Unmarshaler, unsigned and small integers.
type jTask struct {
	ID        string             `yaml:"id"`
	DependsOn []string           `yaml:"depends_on"`
	Needs     map[string]jNeed   `yaml:"needs"`
	Locks     []jLock            `yaml:"locks"`
	Timeout   *time.Duration     `yaml:"timeout"`
	Input     any                `yaml:"input"`
	Learn     *bool              `yaml:"learn"`
	Weights   map[string]float64 `yaml:"weights"`
}

type jNeed struct {
	From   string `yaml:"from"`
	Select string `yaml:"select"`
}

type jDoc struct {
	Version *int           `yaml:"version"`
	Name    string         `yaml:"name"`
	Tasks   []jTask        `yaml:"tasks"`
	Addr    netip.Addr     `yaml:"addr"`
	Small   uint8          `yaml:"small"`
	Tiny    int8           `yaml:"tiny"`
	Ratio   float32        `yaml:"ratio"`
	Nested  [][]int        `yaml:"nested"`
	Odd     map[int]string `yaml:"odd"`
	Lock    *jLock         `yaml:"lock"`
	Hidden  string         `yaml:"-"`
}

// jLock reads a bare name or {name, mode}, through the node it is given.
type jLock struct {
	Name, Mode string
	Line, Col  int
}

func (l *jLock) UnmarshalStrictYAML(d *Decoder, n *yaml.Node, path string) {
	l.Line, l.Col = n.Line, n.Column
	switch n.Kind {
	case yaml.ScalarNode:
		l.Name = n.Value
	case yaml.MappingNode:
		var m struct {
			Name string `yaml:"name"`
			Mode string `yaml:"mode"`
		}
		d.Decode(n, reflect.ValueOf(&m).Elem(), path)
		l.Name, l.Mode = m.Name, m.Mode
	default:
		d.Errorf(n, path, "want a lock")
	}
}

var jsonSeeds = []string{
	`{}`,
	"{\"version\": 1, \"name\": \"p\", \"tasks\": [\n  {\"id\": \"a\", \"depends_on\": [], \"locks\": [\"x\", {\"name\": \"y\", \"mode\": \"shared\"}]},\n  {\"id\": \"b\", \"depends_on\": [\"a\"], \"needs\": {\"k\": {\"from\": \"a\", \"select\": \"patch\"}}, \"timeout\": \"5m\", \"learn\": true}\n]}\n",
	`{"tasks":[{"id":"a","input":{"f":1.5,"i":-3,"z":-0,"e":1E+3,"s":"\u00e9\n\t\"\\","n":null,"b":[true,false,{}],"l":[]}}]}`,
	`{"addr":"::1","small":255,"tiny":-128,"ratio":0.5,"nested":[[1,2],[],[3]],"odd":{"1":"x"},"lock":"l"}`,
	`{"small":256,"tiny":1.5,"ratio":"x","addr":"nope","version":null,"tasks":null,"lock":{"name":1}}`,
	`{"name":"a","name":"b","tasks":[{"id":"a","id":"b","needs":{"k":{},"k":{}},"input":{"x":1,"x":2}}]}`,
	`{"unknown":1,"tasks":[{"bogus":[1,{"a":2}]}],"Hidden":"h"}`,
	`{"tasks":{"id":"a"},"name":["x"],"version":"1","nested":[1,[2]]}`,
	`{"tasks":[{"timeout":"-1s","learn":"yes","weights":{"a":1e400,"b":1}}]}`,
	`{"a": 1} {"b": 2}`,
	"{\"a\"\n: 1}",
	`{"name":"\/"}`,
	`{"name":"\ud83d\ude00"}`,
	`{"version":123456789012345678901}`,
	"\t{\"name\":\"x\"}",
	"{\"name\":\"x\"}\t",
	"{\t\"name\":\t\"x\"\t}",
	"{\"name\":\"x\"}\r",
	"{\"name\":\"x\"}\r\n",
	"{\"name\": \"a\u2028b\"}",
	"{\"name\": \"\u0085\"}",
	`{"name":"x",}`,
	`{"name":"x"}` + "\n---\n",
	"{\"name\":\"x\"} # comment",
	`{"tasks":[{"input":` + strings.Repeat("[", 120) + strings.Repeat("]", 120) + `}]}`,
	`{"tasks":[{"input":{"` + strings.Repeat("k", 1100) + `":1}}]}`,
	`{"<<":{"name":"x"}}`,
	`{"tasks":[{"input":{"t":2001-12-14}}]}`,
}

// FuzzJSONNode_MatchesYAML: whatever document the scanner reads whole as a node tree,
// yaml.v3 reads as one document with the same tree (kinds, styles, tags, values, lines and
// columns).
func FuzzJSONNode_MatchesYAML(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		s := &jsonScanner{b: src, line: 1}
		s.ws()
		if s.peek() != '{' {
			return
		}
		got, ok := s.node()
		s.ws()
		if !ok || s.bad || s.i != len(src) {
			return
		}
		var docs []*yaml.Node
		dec := yaml.NewDecoder(strings.NewReader(string(src)))
		for {
			var doc yaml.Node
			if err := dec.Decode(&doc); err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("the scanner read %q; yaml.v3 refuses it: %v", src, err)
				}
				break
			}
			docs = append(docs, &doc)
		}
		if len(docs) != 1 || len(docs[0].Content) != 1 {
			t.Fatalf("the scanner read %q as one document; yaml.v3 reads %d", src, len(docs))
		}
		if diff := nodeDiff(got, docs[0].Content[0], ""); diff != "" {
			t.Fatalf("the scanner read %q otherwise than yaml.v3: %s", src, diff)
		}
	})
}

func nodeDiff(got, want *yaml.Node, at string) string {
	if got.Kind != want.Kind || got.Style != want.Style || got.Tag != want.Tag || got.Value != want.Value ||
		got.Line != want.Line || got.Column != want.Column || want.Anchor != "" || len(got.Content) != len(want.Content) {
		return at + ": got " + show(got) + ", yaml.v3 " + show(want)
	}
	for i := range got.Content {
		if d := nodeDiff(got.Content[i], want.Content[i], at+"/"+want.Content[i].Value); d != "" {
			return d
		}
	}
	return ""
}

func show(n *yaml.Node) string {
	return fmt.Sprintf("{kind %d style %d tag %s value %q anchor %q at %d:%d, %d children}",
		n.Kind, n.Style, n.Tag, n.Value, n.Anchor, n.Line, n.Column, len(n.Content))
}

// FuzzDecodeJSON_MatchesYAML: Decode (the fast path when it takes the document) gives what
// the YAML path gives: the same value, the same errors and the same positions, for a typed
// target and for a free-form one.
func FuzzDecodeJSON_MatchesYAML(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		matchYAML(t, src, func() any { return new(jDoc) })
		matchYAML(t, src, func() any { return new(any) })
	})
}

// matchYAML decodes src both ways into fresh targets and fails on any difference; it
// reports whether the fast path took src.
func matchYAML(t *testing.T, src []byte, target func() any) (fast bool) {
	t.Helper()
	got, want := target(), target()
	_, _, fast = decodeJSON("f.json", src, target())
	gotPos, gotErr := Decode("f.json", src, got)
	wantPos, wantErr := DecodeYAML("f.json", src, want)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("%q: error %v, the YAML path's %v", src, gotErr, wantErr)
	case gotErr != nil && !reflect.DeepEqual(gotErr, wantErr):
		t.Fatalf("%q: errors\n%v\nthe YAML path's\n%v", src, gotErr, wantErr)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%q: value %#v, the YAML path's %#v", src, got, want)
	}
	gotPos.once.Do(gotPos.load)
	if len(gotPos.lines) == 0 && len(wantPos.lines) == 0 {
		return fast
	}
	if !reflect.DeepEqual(gotPos.lines, wantPos.lines) || gotPos.file != wantPos.file {
		t.Fatalf("%q: positions %v, the YAML path's %v", src, gotPos.lines, wantPos.lines)
	}
	return fast
}

// TestDecodeJSON_GivesUp: documents the fast path does not take, each one YAML may read
// otherwise than JSON does; Decode still gives the YAML path's answer.
func TestDecodeJSON_GivesUp(t *testing.T) {
	for name, src := range map[string]string{
		"escaped slash (no YAML escape)":         `{"name":"a\/b"}`,
		"surrogate pair (refused by yaml.v3)":    `{"name":"\ud83d\ude00"}`,
		"integer past int64 (a float in YAML)":   `{"tasks":[{"input":{"n":123456789012345678901}}]}`,
		"integer past int64 (uint64 in YAML)":    `{"tasks":[{"input":{"n":9223372036854775808}}]}`,
		"float past float64 (a string in YAML)":  `{"tasks":[{"input":{"n":1e400}}]}`,
		"tab before the root":                    "\t{\"name\":\"x\"}",
		"tab after the root":                     "{\"name\":\"x\"}\t",
		"lone carriage return (a YAML break)":    "{\"name\":\r\"x\"}",
		"line separator (a YAML break)":          "{\"name\":\"a\u2028b\"}",
		"next line (a YAML break)":               "{\"name\":\"a\u0085b\"}",
		"byte order mark inside":                 "{\"name\":\"\ufeff\"}",
		"invalid UTF-8":                          "{\"name\":\"\xff\"}",
		"raw tab in a string":                    "{\"name\":\"a\tb\"}",
		"trailing comma":                         `{"name":"x",}`,
		"second document":                        "{\"name\":\"x\"}\n---\n{}\n",
		"comment":                                "{\"name\":\"x\"} # c",
		"key apart from its colon":               "{\"name\"\n: \"x\"}",
		"key longer than a YAML simple key":      `{"tasks":[{"input":{"` + strings.Repeat("k", 1100) + `":1}}]}`,
		"nesting past maxDepth":                  `{"tasks":[{"input":` + strings.Repeat("[", 120) + strings.Repeat("]", 120) + `}]}`,
		"YAML flow syntax":                       `{name: x}`,
		"single quotes":                          `{'name': 'x'}`,
		"unterminated":                           `{"name":"x"`,
		"leading zero":                           `{"version":01}`,
		"plus sign":                              `{"version":+1}`,
		"timestamp-like plain scalar (not JSON)": `{"tasks":[{"input":{"t":2001-12-14}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			for _, target := range []func() any{func() any { return new(jDoc) }, func() any { return new(any) }} {
				if matchYAML(t, []byte(src), target) {
					t.Errorf("the fast path took %q", src)
				}
			}
		})
	}
}

// TestDecodeJSON_Takes: the JSON agora and its clients write is read by the fast path, with
// or without errors, with the YAML path's answer.
func TestDecodeJSON_Takes(t *testing.T) {
	for _, src := range []string{
		jsonSeeds[1],
		jsonSeeds[2],
		jsonSeeds[3],
		`{"small":256,"tiny":1.5,"ratio":"x","addr":"nope","version":null,"tasks":null,"lock":{"name":1}}`,
		`{"name":"a","name":"b","tasks":[{"id":"a","id":"b","needs":{"k":{},"k":{}},"input":{"x":1,"x":2}}]}`,
		`{"unknown":1,"tasks":[{"bogus":[1,{"a":2}]}],"Hidden":"h"}`,
		"{\r\n\t\"name\": \"\\u00e9\\u0000\\\"\",\r\n\t\"tasks\": [{\"id\": \"\u00e9\U0001F600\", \"input\": {\"a\": -0.0, \"b\": 1E-3}}]\r\n}\r\n",
	} {
		if !matchYAML(t, []byte(src), func() any { return new(jDoc) }) {
			t.Errorf("the fast path gave up on %q", src)
		}
	}
}

// TestDecodeJSON_FilledTarget: a target that already holds values (defaults) is decoded by
// the YAML path, which merges into it; the fast path would have to undo a half-written one.
func TestDecodeJSON_FilledTarget(t *testing.T) {
	doc := jDoc{Name: "default", Small: 7}
	if _, _, ok := decodeJSON("f.json", []byte(`{"small":1}`), &doc); ok {
		t.Fatal("the fast path took a filled target")
	}
	if _, err := Decode("f.json", []byte(`{"small":1}`), &doc); err != nil || doc.Name != "default" || doc.Small != 1 {
		t.Fatalf("Decode into a filled target: %+v, %v", doc, err)
	}
}

// TestDecodeJSON_ManyErrors: past maxErrors both paths stop at the same place and read the
// rest only for its syntax.
func TestDecodeJSON_ManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range 150 {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`{"id":1,"bogus":[{"x":1}],"input":{"a":1,"a":2}}`)
	}
	b.WriteString(`],"name":"x"}`)
	if !matchYAML(t, []byte(b.String()), func() any { return new(jDoc) }) {
		t.Error("the fast path gave up")
	}
}

// TestDecodeJSON_PositionsOnDemand: a JSON document decoded without an error records no
// positions until asked, then has the YAML path's, computed once however many goroutines ask
// at once (checks of one plan may run side by side).
func TestDecodeJSON_PositionsOnDemand(t *testing.T) {
	src := []byte(jsonSeeds[1])
	var doc jDoc
	pos, err := Decode("f.json", src, &doc)
	if err != nil {
		t.Fatal(err)
	}
	if pos.lines != nil || pos.typ == nil {
		t.Fatalf("positions recorded while decoding: %v", pos.lines)
	}
	wantPos, _ := DecodeYAML("f.json", src, new(jDoc))
	done := make(chan int)
	for range 4 {
		go func() { done <- pos.Line("tasks[1].needs.k.from") }()
	}
	for range 4 {
		if got, want := <-done, wantPos.Line("tasks[1].needs.k.from"); got != want || got != 3 {
			t.Errorf("Line = %d, the YAML path's %d, want 3", got, want)
		}
	}
	if e := pos.Errorf("tasks[1].timeout", "x"); e.Line != 3 || e.File != "f.json" {
		t.Errorf("Errorf = %+v", e)
	}
}
