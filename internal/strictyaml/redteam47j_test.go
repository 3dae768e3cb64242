package strictyaml

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// unknownKeys is a mapping of n distinct keys no struct field names.
func unknownKeys(n int) []byte {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// TestRedTeam47J_ManyUnknownKeysLinear: past maxErrors a struct's unknown keys are still read
// (and marked, as the YAML path does); the fast path's list of keys seen grew with each, so a
// 16 MiB plan of distinct unknown keys (two million) cost hours, quadratic where the YAML
// path is linear.
func TestRedTeam47J_ManyUnknownKeysLinear(t *testing.T) {
	src := unknownKeys(20000)
	if !matchYAML(t, src, func() any { return new(jDoc) }) {
		t.Fatal("the fast path gave up")
	}
	// The work is linear when the list of keys seen stops growing at the error cap: past it
	// keys are only marked, never searched for or added (the list searched for each of 20,000
	// unknown keys was quadratic: seconds for this document, hours for a 16 MiB one).
	longest := 0
	testOnlySeen = func(n int) { longest = max(longest, n) }
	defer func() { testOnlySeen = nil }()
	if _, err := Decode("f.json", src, new(jDoc)); err == nil {
		t.Fatal("20,000 unknown keys were accepted")
	}
	if bound := len(cachedFields(reflect.TypeFor[jDoc]())) + maxErrors; longest > bound {
		t.Fatalf("the list of keys seen grew to %d for 20,000 unknown keys; past the error cap it must stop (at most %d)", longest, bound)
	}
}

// redTeam47JInputs are documents where JSON and YAML could part: keys spelled otherwise,
// YAML-looking strings, numbers at the edges, whitespace, escapes, trailing documents.
var redTeam47JInputs = []string{
	`{"name":"a","\u006eame":"b"}`,
	`{"tasks":[{"input":{"id":1,"\u0069d":2}}]}`,
	`{"tasks":[{"input":{"\u0000":1,"":2,"\u0000":3}}]}`,
	`{"Name":"x","NAME":"y"}`,
	`{"<<":{"name":"x"},"name":"y"}`,
	`{"name":"!!int 1","tasks":[{"id":"&a","depends_on":["*a"]}]}`,
	`{"tasks":[{"input":{"~":1,"null":2,"true":3,"y":"n","on":"off","v":["y","n","on","off","~","yes","NO"]}}]}`,
	`{"name":"~"}`, `{"name":null}`, `{"name":true}`, `{"name":1}`, `{"name":1.5}`,
	`{"version":-0}`, `{"version":-0.0}`, `{"version":1E3}`, `{"version":1e-400}`, `{"version":1e400}`,
	`{"version":9223372036854775807}`, `{"version":9223372036854775808}`, `{"version":-9223372036854775808}`, `{"version":-9223372036854775809}`,
	`{"version":"123"}`, `{"small":"1"}`, `{"small":-0}`, `{"small":1.0}`, `{"small":1e2}`, `{"tiny":-129}`, `{"ratio":1e39}`, `{"ratio":-1e-46}`,
	`{"version":0x10}`, `{"version":0o7}`, `{"version":1_000}`, `{"version":.5}`, `{"version":5.}`, `{"version":+1}`, `{"version":00}`,
	`{"tasks":[{"input":{"a":-0,"b":0e0,"c":-0E-0,"d":1.0e+308,"e":4.9e-324,"f":123456789012345678,"g":-1.5e-7}}]}`,
	`{"tasks":[{"timeout":"1h2m3.5s","learn":null},{"timeout":1},{"timeout":"0"},{"timeout":null},{"timeout":"1d"}]}`,
	`{"tasks":null,"nested":null,"odd":null,"lock":null,"addr":null,"small":null,"ratio":null}`,
	`{"tasks":[],"nested":[[]],"odd":{},"lock":{},"name":""}`,
	`{"tasks":[{}],"weights":{}}`, `{"tasks":[{"weights":{"a":null,"b":"1","c":true}}]}`,
	"{\"name\"\t:\t\"x\"}", "{\"name\":\"x\"\f}", "{\"name\":\"x\"\u00a0}", "\ufeff{\"name\":\"x\"}", "{\"name\":\"x\"}\n\n  \n",
	"\n\n{\n\n\"name\"\n:\n\"x\"}", "{\r\n\"name\":\r\n\"x\"\r\n}\r\n", " \r\n {}",
	`{"name":"\"\\\b\f\n\r\t\u0041\u00e9\u20ac\uffff\ufffe\u0085\u2028\u0000\u001f\u007f"}`,
	"{\"name\":\"\xc3\"}", "{\"name\":\"\xed\xa0\x80\"}", "{\"name\":\"\x00\"}", "{\"name\":\"\x7f\"}", "{\"name\":\"\xef\xbf\xbe\"}",
	"{} {}", "{}\n---\n", "{}\n...\n", "{}\n---\n{}", "{}x", "{} # x", "{}#x", "{\"name\":\"x\" # c\n}", "{}\n#x\n",
	`{"name":&a "x"}`, `{"tasks":[&a {}]}`, `{"tasks":*a}`, `{"name":!!str "x"}`, `{"name":!!int "1"}`, `{"version":!!str 1}`,
	`{"name":"x","":1}`, `{"tasks":[{"input":{"":{"":[]}}}]}`,
	"{\"tasks\":[{\"input\":{\"" + strings.Repeat("k", 997) + "\":1}}]}",
	"{\"tasks\":[{\"input\":{\"" + strings.Repeat("k", 998) + "\" :1}}]}",
	"{\"tasks\":[{\"input\":{\"" + strings.Repeat("\\u00e9", 200) + "\":1}}]}",
	"{\"tasks\":[{\"input\":{\"" + strings.Repeat("é", 499) + "\":1}}]}",
	"{\"tasks\":[{\"input\":{\"" + strings.Repeat("k", 1025) + "\":1}}]}",
	"{\"tasks\":[{\"input\":" + strings.Repeat("[", 97) + strings.Repeat("]", 97) + "}]}",
	"{\"tasks\":[{\"input\":" + strings.Repeat("[", 98) + strings.Repeat("]", 98) + "}]}",
	"{\"tasks\":[{\"input\":" + strings.Repeat("[", 99) + strings.Repeat("]", 99) + "}]}",
	"{\"tasks\":[{\"input\":" + strings.Repeat("[", 98) + "1" + strings.Repeat("]", 98) + "}]}",
	"{\"tasks\":[{\"bogus\":" + strings.Repeat("[", 101) + strings.Repeat("]", 101) + "}]}",
	"{\"nested\":[[1,2],[3,\"x\"],{}, null, [null]]}",
	`{"nested":[[1,[2]],[3]]}`, `{"nested":[["a\",]"],[3]]}`, `{"nested":[[1,],[3]]}`, `{"nested":[,]}`, `{"nested":[[1]]]}`,
	`{"odd":{"1":"x","1":"y"}}`, `{"odd":[]}`, `{"addr":"::1","addr":"x"}`, `{"addr":{"x":1}}`, `{"addr":[]}`, `{"addr":1}`,
	`{"lock":"a","lock":{"name":"b"}}`, `{"lock":{"name":"a","name":"b","x":1}}`, `{"lock":[1]}`, `{"lock":1}`, `{"lock":null}`,
	`{"tasks":[{"locks":[null,1,true,{"mode":[]}]}]}`,
	`{"Hidden":"x","hidden":"y","-":1}`,
	"{\"name\":\n\"x\",\n\"name\":\n\"y\"}",
	"{\"tasks\":[\n{\"id\":1},\n{\"id\":[]},\n{\"id\":{}}\n]}",
}

// TestRedTeam47J_Differential: each input gives the YAML path's value, errors and positions,
// into a typed and a free-form target.
func TestRedTeam47J_Differential(t *testing.T) {
	for _, src := range redTeam47JInputs {
		matchYAML(t, []byte(src), func() any { return new(jDoc) })
		matchYAML(t, []byte(src), func() any { return new(any) })
	}
}

// TestRedTeam47J_DepthBoundary: nesting around maxDepth through each way the fast path
// reads a collection (walked free-form values, a node for an Unmarshaler or a type mismatch,
// a skipped unknown field, past maxErrors) gives the YAML path's answer.
func TestRedTeam47J_DepthBoundary(t *testing.T) {
	manyErrs := ""
	for i := range 101 {
		manyErrs += `"u` + strconv.Itoa(i) + `":1,`
	}
	for k := 94; k <= 104; k++ {
		nest := func(open, close, leaf string) string {
			return strings.Repeat(open, k) + leaf + strings.Repeat(close, k)
		}
		for _, src := range []string{
			`{"tasks":[{"input":` + nest("[", "]", "") + `}]}`,
			`{"tasks":[{"input":` + nest("[", "]", "1") + `}]}`,
			`{"tasks":[{"input":` + nest(`{"a":`, "}", "1") + `}]}`,
			`{"tasks":[{"input":` + nest(`{"a":`, "}", "{}") + `}]}`,
			`{"lock":{"name":` + nest("[", "]", "") + `}}`,
			`{"lock":` + nest(`{"name":`, "}", `"x"`) + `}`,
			`{"name":` + nest("[", "]", "") + `}`,
			`{"bogus":` + nest("[", "]", "") + `}`,
			`{"nested":` + nest("[", "]", "") + `}`,
			`{` + manyErrs + `"tasks":[{"input":` + nest("[", "]", "1") + `}]}`,
			`{` + manyErrs + `"bogus":` + nest(`{"a":`, "}", "1") + `}`,
			nest(`{"a":`, "}", "1"),
		} {
			matchYAML(t, []byte(src), func() any { return new(jDoc) })
			matchYAML(t, []byte(src), func() any { return new(any) })
		}
	}
}
