// Package strictyaml decodes human-written YAML (and JSON, which YAML contains) into Go structs
// strictly: unknown fields, duplicate keys, aliases and type mismatches are errors, and every
// error found is reported at once with its file, line and path (tasks[3].depends_on[0]).
//
// It exists because go.yaml.in/yaml/v3 stops at the first error of some kinds, names no path,
// and does not reject duplicate keys when decoding through a yaml.Node. Manifests, capability
// files, subagent files, plans and agora.yaml all go through here.
package strictyaml

import (
	"bytes"
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Error is one problem found in a document.
type Error struct {
	File string
	Line int
	Path string
	Msg  string
}

func (e Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a document, in document order.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Sort orders errors by file and line, keeping the order of errors on the same line.
func (es Errors) Sort() {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].File != es[j].File {
			return es[i].File < es[j].File
		}
		return es[i].Line < es[j].Line
	})
}

// Collect returns the per-field errors of a [Decode] error so a caller can add its own checks
// to them. ok is false when err is something else (invalid YAML) and checking further makes no
// sense.
func Collect(err error) (errs Errors, ok bool) {
	if err == nil {
		return nil, true
	}
	var es Errors
	if errors.As(err, &es) && (len(es) == 0 || !strings.HasPrefix(es[0].Msg, "invalid YAML")) {
		return es, true
	}
	return nil, false
}

// Positions maps a decoded path to the line it came from, so checks made after decoding can
// point at the source too.
type Positions struct {
	file  string
	lines map[string]int
	// A JSON document decoded without an error records no lines while it is decoded, since a
	// map of every path of a 100,000-task plan is several times the plan's size and is read
	// only to place a later problem: typ set, they are computed on first use from the
	// document, src, or from its compressed copy, packed ([Positions.Keep]).
	once   sync.Once
	typ    reflect.Type
	src    []byte
	packed []byte
}

// Line returns the line of path, or of its nearest ancestor that has one.
func (p *Positions) Line(path string) int {
	if p == nil {
		return 0
	}
	p.once.Do(p.load)
	for {
		if l, ok := p.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return p.lines[""]
		}
		path = path[:i]
	}
}

func (p *Positions) load() {
	if p.typ == nil {
		return
	}
	src := p.src
	if p.packed != nil {
		src = unpack(p.packed)
	}
	p.lines = positions(p.file, src, p.typ)
	p.typ, p.src, p.packed = nil, nil, nil
}

// Errorf builds an [Error] at path.
func (p *Positions) Errorf(path, format string, args ...any) Error {
	var file string
	if p != nil {
		file = p.file
	}
	return Error{File: file, Line: p.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Unmarshaler is implemented by types that decode themselves from a node (a lock that may be a
// bare string or a mapping, say). Errors it returns are reported at the node's path and line.
type Unmarshaler interface {
	UnmarshalStrictYAML(d *Decoder, n *yaml.Node, path string)
}

// Decoder walks one document. Custom [Unmarshaler]s use it to decode their parts.
type Decoder struct {
	pos     *Positions
	errs    Errors
	depth   int  // nesting of the node being decoded
	stopped bool // maxErrors reached: decoding gives up
	// nomark: positions are not recorded, and the first error stops decoding (the JSON fast
	// path's first pass, which gives up on any error and decodes again with positions).
	nomark bool
	// scratch is the node of the scalar the JSON fast path is decoding, reused.
	scratch yaml.Node
}

// Limits that keep a hostile document (a plan arrives from an orchestrator, maybe an AI) from
// costing more than its size: yaml.v3 alone allows 10,000 levels of nesting, and every node's
// path repeats its ancestors' keys.
const (
	maxDepth  = 100  // levels of nesting
	maxKeyLen = 1024 // bytes in one mapping key
	maxErrors = 100  // errors reported before decoding stops
)

// Decode parses src, which came from file (used in messages only), into out, a non-nil pointer.
// Struct fields are matched by their `yaml` tag name (the field name lowercased when absent);
// fields tagged "-" are never set. An empty document leaves out unchanged.
//
// A JSON document decoded without an error has its Positions computed from src when first
// asked (see json.go), so the Positions keep src and it must not change while they are used.
func Decode(file string, src []byte, out any) (*Positions, error) {
	if pos, err, ok := decodeJSON(file, src, out); ok {
		return pos, err
	}
	return DecodeYAML(file, src, out)
}

// DecodeYAML is [Decode] without the JSON fast path: src always goes through yaml.v3's node
// tree. It is the reference the fast path is held to, and costs several times the memory for
// a large JSON document.
func DecodeYAML(file string, src []byte, out any) (*Positions, error) {
	d := newDecoder(file)
	if err := d.decodeYAML(src, reflect.ValueOf(out).Elem()); err != nil {
		return d.pos, err
	}
	return d.pos, nil
}

func newDecoder(file string) *Decoder {
	return &Decoder{pos: &Positions{file: file, lines: map[string]int{}}}
}

// decodeYAML decodes src through yaml.v3's node tree into v.
func (d *Decoder) decodeYAML(src []byte, v reflect.Value) error {
	file := d.pos.file
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err == io.EOF {
		return nil
	} else if err != nil {
		return Errors{{File: file, Line: yamlErrLine(err), Msg: cleanYAMLErr(err)}}
	}
	// A second document would be silently ignored by a reader that stops after the first, so
	// two files pasted together are refused rather than half applied.
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return Errors{{File: file, Line: yamlErrLine(err), Msg: cleanYAMLErr(err)}}
		}
		return Errors{{File: file, Line: extra.Line, Msg: "invalid YAML: a file holds one YAML document; found a second"}}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	d.pos.lines[""] = root.Line
	d.Decode(root, v, "")
	if len(d.errs) > 0 {
		return d.errs
	}
	return nil
}

// Errorf records an error at the node and path.
func (d *Decoder) Errorf(n *yaml.Node, path, format string, args ...any) {
	d.add(n.Line, path, format, args...)
}

func (d *Decoder) add(line int, path, format string, args ...any) {
	if d.stopped {
		return
	}
	if len(d.errs) == maxErrors {
		d.errs = append(d.errs, Error{File: d.pos.file, Line: line, Msg: fmt.Sprintf("more than %d errors; stopping here", maxErrors)})
		d.stopped = true
		return
	}
	d.errs = append(d.errs, Error{File: d.pos.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	if d.nomark {
		d.stopped = true
	}
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// mark records line as the line of path unless path already has one: a mapping value is
// marked with its key's line before it is decoded, since a block value starts on the next line.
func (d *Decoder) mark(path string, line int) {
	if d.nomark {
		return
	}
	if _, ok := d.pos.lines[path]; !ok {
		d.pos.lines[path] = line
	}
}

// errorAt records an error about the value at path on the line recorded for path.
func (d *Decoder) errorAt(n *yaml.Node, path, format string, args ...any) {
	line := n.Line
	if l, ok := d.pos.lines[path]; ok {
		line = l
	}
	d.add(line, path, format, args...)
}

// Decode decodes n into v (settable), recording errors rather than stopping.
func (d *Decoder) Decode(n *yaml.Node, v reflect.Value, path string) {
	if d.stopped {
		return
	}
	d.mark(path, n.Line)
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		d.errorAt(n, path, "anchors and aliases are not allowed")
		return
	}
	if d.depth >= maxDepth {
		d.errorAt(n, path, "nested more than %d levels deep", maxDepth)
		return
	}
	d.depth++
	defer func() { d.depth-- }()
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		v.Addr().Interface().(Unmarshaler).UnmarshalStrictYAML(d, n, path)
		return
	}
	if v.Kind() == reflect.Pointer {
		if isNull(n) {
			v.SetZero()
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.Decode(n, v.Elem(), path)
		return
	}
	if v.Type() == durationType {
		d.duration(n, v, path)
		return
	}
	// A struct that also reads itself from text (a grant's egress rule: "host:port" or
	// {host, port, methods, paths}) takes a mapping as the struct and a scalar as text.
	if v.Kind() == reflect.Struct && n.Kind == yaml.MappingNode && hasExportedField(v.Type()) {
		d.structure(n, v, path)
		return
	}
	if v.CanAddr() && v.Addr().Type().Implements(textType) {
		if !d.want(n, path, yaml.ScalarNode, "a string") {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.Errorf(n, path, "%v", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Map:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.sequence(n, v, path)
	case reflect.String:
		if d.want(n, path, yaml.ScalarNode, "a string") {
			if n.Tag == "!!null" {
				d.Errorf(n, path, "want a string, got null")
				return
			}
			v.SetString(n.Value)
		}
	case reflect.Bool:
		if !d.want(n, path, yaml.ScalarNode, "true or false") {
			return
		}
		switch n.Value {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.Errorf(n, path, "want true or false, got %q", n.Value)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !d.want(n, path, yaml.ScalarNode, "an integer") {
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
		if err != nil || n.Tag != "!!int" || v.OverflowInt(i) {
			d.Errorf(n, path, "want an integer, got %q", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !d.want(n, path, yaml.ScalarNode, "a non-negative integer") {
			return
		}
		u, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
		if err != nil || n.Tag != "!!int" || v.OverflowUint(u) {
			d.Errorf(n, path, "want a non-negative integer, got %q", n.Value)
			return
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		if !d.want(n, path, yaml.ScalarNode, "a number") {
			return
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || (n.Tag != "!!float" && n.Tag != "!!int") || math.IsNaN(f) || math.IsInf(f, 0) {
			d.Errorf(n, path, "want a number, got %q", n.Value)
			return
		}
		v.SetFloat(f)
	case reflect.Interface:
		d.anyValue(n, v, path)
	default:
		d.Errorf(n, path, "cannot decode into %s", v.Type())
	}
}

func (d *Decoder) want(n *yaml.Node, path string, kind yaml.Kind, what string) bool {
	if n.Kind == kind {
		return true
	}
	d.errorAt(n, path, "want %s, got %s", what, describe(n))
	return false
}

func (d *Decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if !d.want(n, path, yaml.ScalarNode, "a duration such as 30s or 5m") {
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil || dur < 0 {
		d.Errorf(n, path, "want a duration such as 30s or 5m, got %q", n.Value)
		return
	}
	v.SetInt(int64(dur))
}

type fieldInfo struct {
	index []int
	name  string
}

// fieldCache holds the fields of each struct type decoded so far (reflect.Type to
// map[string]fieldInfo, never changed once stored): a plan of 10,000 tasks built the same
// map of the task type's fields 10,000 times.
var fieldCache sync.Map

// cachedFields is [structFields] of t, computed once per type.
func cachedFields(t reflect.Type) map[string]fieldInfo {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]fieldInfo)
	}
	f, _ := fieldCache.LoadOrStore(t, structFields(t))
	return f.(map[string]fieldInfo)
}

func structFields(t reflect.Type) map[string]fieldInfo {
	fields := map[string]fieldInfo{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && strings.Contains(opts, "inline") {
			for k, sub := range structFields(f.Type) {
				sub.index = append([]int{i}, sub.index...)
				fields[k] = sub
			}
			continue
		}
		name = cmp.Or(name, strings.ToLower(f.Name))
		fields[name] = fieldInfo{index: []int{i}, name: name}
	}
	return fields
}

func (d *Decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		return
	}
	if !d.want(n, path, yaml.MappingNode, "a mapping") {
		return
	}
	fields := cachedFields(v.Type())
	d.entries(n, path, func(k, val *yaml.Node, sub string) {
		f, ok := fields[k.Value]
		if !ok {
			d.Errorf(k, sub, "unknown field %q; known fields: %s", k.Value, knownFields(fields))
			return
		}
		d.Decode(val, v.FieldByIndex(f.index), sub)
	})
}

// entries calls each with every key of mapping n, its value and its path, after checking the
// key ([Decoder.key]) and refusing a duplicate one.
func (d *Decoder) entries(n *yaml.Node, path string, each func(k, val *yaml.Node, sub string)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.key(k, func() string { return path }) {
			continue
		}
		sub := join(path, k.Value)
		if line, dup := seen[k.Value]; dup {
			d.Errorf(k, sub, "duplicate key (first at line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		d.mark(sub, k.Line)
		each(k, val, sub)
	}
}

func knownFields(fields map[string]fieldInfo) string {
	return strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
}

func (d *Decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		return
	}
	if !d.want(n, path, yaml.MappingNode, "a mapping") {
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.Errorf(n, path, "cannot decode into %s", v.Type())
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(n.Content)/2))
	}
	d.entries(n, path, func(k, val *yaml.Node, sub string) {
		elem := reflect.New(v.Type().Elem()).Elem()
		d.Decode(val, elem, sub)
		key := reflect.New(v.Type().Key()).Elem()
		key.SetString(k.Value)
		v.SetMapIndex(key, elem)
	})
}

func (d *Decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if isNull(n) {
		return
	}
	if !d.want(n, path, yaml.SequenceNode, "a list") {
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.Decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

// anyValue decodes free-form data (a task's input) into JSON-compatible Go values:
// map[string]any, []any, string, float64 or int64, bool and nil.
func (d *Decoder) anyValue(n *yaml.Node, v reflect.Value, path string) {
	val, ok := d.plain(n, &anyPath{base: path}, d.depth)
	if ok && val != nil {
		v.Set(reflect.ValueOf(val))
	}
}

// anyPath is the path of a node inside a free-form value. It becomes a string only when an
// error names it: built eagerly, every node would copy its ancestors' keys, quadratic in a
// wide or deep value.
type anyPath struct {
	parent *anyPath
	base   string // the free-form value's own path (root only)
	key    string // mapping key, when index < 0
	index  int
}

func (p *anyPath) String() string {
	switch {
	case p.parent == nil:
		return p.base
	case p.index >= 0:
		return fmt.Sprintf("%s[%d]", p.parent, p.index)
	}
	return join(p.parent.String(), p.key)
}

func (d *Decoder) plain(n *yaml.Node, path *anyPath, depth int) (any, bool) {
	if d.stopped {
		return nil, false
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		d.errorAt(n, path.String(), "anchors and aliases are not allowed")
		return nil, false
	}
	if depth >= maxDepth {
		d.errorAt(n, path.String(), "nested more than %d levels deep", maxDepth)
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if !d.key(k, path.String) {
				ok = false
				continue
			}
			sub := &anyPath{parent: path, key: k.Value, index: -1}
			if _, dup := m[k.Value]; dup {
				d.Errorf(k, sub.String(), "duplicate key")
				ok = false
				continue
			}
			val, vok := d.plain(n.Content[i+1], sub, depth+1)
			ok = ok && vok
			m[k.Value] = val
		}
		return m, ok
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		ok := true
		for i, item := range n.Content {
			val, vok := d.plain(item, &anyPath{parent: path, index: i}, depth+1)
			ok = ok && vok
			s[i] = val
		}
		return s, ok
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, true
		case "!!bool":
			return n.Value == "true", n.Value == "true" || n.Value == "false" || d.bad(n, path, "want true or false")
		case "!!int":
			i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
			if err != nil {
				return nil, d.bad(n, path, "integer out of range")
			}
			return i, true
		case "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, d.bad(n, path, "want a finite number")
			}
			return f, true
		case "!!str", "":
			return n.Value, true
		default:
			return nil, d.bad(n, path, "unsupported type "+n.Tag)
		}
	}
	return nil, d.bad(n, path, "unsupported value")
}

func (d *Decoder) bad(n *yaml.Node, path *anyPath, msg string) bool {
	d.Errorf(n, path.String(), "%s, got %q", msg, n.Value)
	return false
}

// key reports whether k is a usable mapping key: a scalar without an anchor (an anchored key
// could only be there to be aliased, and aliases are refused).
// path is a func so free-form values build their path only for an error.
func (d *Decoder) key(k *yaml.Node, path func() string) bool {
	switch {
	case k.Kind != yaml.ScalarNode:
		d.Errorf(k, path(), "keys must be plain strings")
		return false
	case k.Anchor != "":
		d.Errorf(k, path(), "anchors and aliases are not allowed")
		return false
	case len(k.Value) > maxKeyLen:
		d.Errorf(k, path(), "key of %d bytes is longer than %d", len(k.Value), maxKeyLen)
		return false
	}
	return true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func yamlErrLine(err error) int {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return 0
	}
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr == nil {
		return line
	}
	return 0
}

func cleanYAMLErr(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "line ") {
		msg = msg[i+2:]
	}
	return "invalid YAML: " + msg
}

// hasExportedField reports whether struct type t has a field a document can name (a text
// type such as netip.Addr has none, and stays text only).
func hasExportedField(t reflect.Type) bool {
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			return true
		}
	}
	return false
}
