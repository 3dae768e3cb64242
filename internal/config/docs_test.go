package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// operationsDoc is the operators' page whose agora.yaml reference must cover every key.
const operationsDoc = "../../docs/operations.md"

// referenceMarker precedes the reference's YAML example in operationsDoc.
const referenceMarker = "<!-- agora.yaml reference"

// TestOperationsDoc_Reference keeps docs/operations.md's agora.yaml reference from drifting:
// its example parses with the real parser (strict: an unknown or misspelt key fails), and
// every yaml key of Config's structs is described in it as `key`.
func TestOperationsDoc_Reference(t *testing.T) {
	b, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, rest, ok := strings.Cut(doc, referenceMarker)
	if !ok {
		t.Fatalf("%s has no %q marker before the reference example", operationsDoc, referenceMarker)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(rest)
	if m == nil {
		t.Fatalf("%s: no ```yaml block after the marker", operationsDoc)
	}
	c := Default(t.TempDir())
	if err := Parse("operations.md", []byte(m[1]), c); err != nil {
		t.Fatalf("the reference example does not parse:\n%v", err)
	}
	keys := map[string]bool{}
	yamlKeys(reflect.TypeOf(Config{}), keys)
	if len(keys) < 40 {
		t.Fatalf("found %d yaml keys in Config; the walk is broken", len(keys))
	}
	for k := range keys {
		if !strings.Contains(doc, "| `"+k+"` |") && !strings.Contains(doc, "\n### `"+k+"`\n") {
			t.Errorf("%s describes no key %q (want a table row \"| `%s` |\" or a section \"### `%s`\")", operationsDoc, k, k, k)
		}
		if !regexp.MustCompile(`(?m)^\s*(- )?\{?.*\b` + regexp.QuoteMeta(k) + `:`).MatchString(m[1]) {
			t.Errorf("the reference example sets no %q", k)
		}
	}
}

// yamlKeys adds the yaml keys of t's fields, recursively through structs, pointers, slices
// and map values; an inline struct's keys are its parent's.
func yamlKeys(t reflect.Type, keys map[string]bool) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		yamlKeys(t.Elem(), keys)
		return
	case reflect.Struct:
	default:
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if name != "" && !strings.Contains(opts, "inline") {
			keys[name] = true
		}
		if tag != "" {
			yamlKeys(f.Type, keys)
		}
	}
}
