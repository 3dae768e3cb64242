package toolreg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// The schema subset a tool may declare. Register refuses anything else, so no constraint
// is written down that the view does not enforce:
//
//   - the top level is {"type":"object","properties":{…},"required":[…],
//     "additionalProperties":false} (plus "description", "title", "$schema");
//   - a property has "type" string, integer, number, boolean or array, and may carry
//     "description", "title", "default", "enum" (strings), "minLength"/"maxLength"
//     (strings, in characters), "minimum"/"maximum" (integers), "items" (arrays: a
//     property schema that is not itself an array), "minItems"/"maxItems" (arrays).
//
// Nested objects are not supported: tool arguments stay flat.

// maxProperties bounds a schema's properties, so the set seen during validation is a bitmask.
const maxProperties = 64

type kind uint8

const (
	kindString kind = iota + 1
	kindInteger
	kindNumber
	kindBoolean
	kindArray
)

var kindNames = map[string]kind{
	"string": kindString, "integer": kindInteger, "number": kindNumber,
	"boolean": kindBoolean, "array": kindArray,
}

// objectSchema is a compiled top-level schema.
type objectSchema struct {
	props    map[string]*propSchema
	required uint64 // bit i set: the property with index i is required
	names    []string
}

type propSchema struct {
	index              int
	kind               kind
	enum               []string
	minLen, maxLen     int // -1 when absent
	hasMin, hasMax     bool
	min, max           int64
	items              *propSchema
	minItems, maxItems int // -1 when absent
}

type objectDoc struct {
	Schema               string                     `json:"$schema"`
	Type                 string                     `json:"type"`
	Title                string                     `json:"title"`
	Description          string                     `json:"description"`
	Properties           map[string]json.RawMessage `json:"properties"`
	Required             []string                   `json:"required"`
	AdditionalProperties *bool                      `json:"additionalProperties"`
}

type propDoc struct {
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Default     json.RawMessage `json:"default"`
	Enum        []string        `json:"enum"`
	MinLength   *int            `json:"minLength"`
	MaxLength   *int            `json:"maxLength"`
	Minimum     *float64        `json:"minimum"`
	Maximum     *float64        `json:"maximum"`
	Items       json.RawMessage `json:"items"`
	MinItems    *int            `json:"minItems"`
	MaxItems    *int            `json:"maxItems"`
}

// compileSchema checks raw against the supported subset and compiles it.
func compileSchema(raw json.RawMessage) (*objectSchema, error) {
	var doc objectDoc
	if err := strictDecode(raw, &doc); err != nil {
		return nil, err
	}
	if doc.Type != "object" {
		return nil, errors.New(`want "type": "object" at the top level`)
	}
	if doc.AdditionalProperties == nil || *doc.AdditionalProperties {
		return nil, errors.New(`want "additionalProperties": false: argument schemas are closed`)
	}
	if len(doc.Properties) > maxProperties {
		return nil, fmt.Errorf("more than %d properties", maxProperties)
	}
	s := &objectSchema{props: make(map[string]*propSchema, len(doc.Properties))}
	for name := range doc.Properties {
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	for i, name := range s.names {
		if name == "" {
			return nil, errors.New("empty property name")
		}
		p, err := compileProp(doc.Properties[name], false)
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		p.index = i
		s.props[name] = p
	}
	for _, r := range doc.Required {
		p, ok := s.props[r]
		switch {
		case !ok:
			return nil, fmt.Errorf("required property %q is not declared", r)
		case s.required&(1<<p.index) != 0:
			return nil, fmt.Errorf("required property %q listed twice", r)
		}
		s.required |= 1 << p.index
	}
	return s, nil
}

func compileProp(raw json.RawMessage, inArray bool) (*propSchema, error) {
	var d propDoc
	if err := strictDecode(raw, &d); err != nil {
		return nil, err
	}
	k, ok := kindNames[d.Type]
	if !ok {
		return nil, fmt.Errorf("type %q is not supported (string, integer, number, boolean, array)", d.Type)
	}
	p := &propSchema{kind: k, minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	only := func(want kind, kw string, present bool) error {
		if present && k != want {
			return fmt.Errorf("%q applies only to type %s", kw, kindName(want))
		}
		return nil
	}
	if err := errors.Join(
		only(kindString, "enum", d.Enum != nil),
		only(kindString, "minLength", d.MinLength != nil),
		only(kindString, "maxLength", d.MaxLength != nil),
		only(kindInteger, "minimum", d.Minimum != nil),
		only(kindInteger, "maximum", d.Maximum != nil),
		only(kindArray, "items", d.Items != nil),
		only(kindArray, "minItems", d.MinItems != nil),
		only(kindArray, "maxItems", d.MaxItems != nil),
	); err != nil {
		return nil, err
	}
	if d.Enum != nil && len(d.Enum) == 0 {
		return nil, errors.New(`empty "enum"`)
	}
	p.enum = d.Enum
	var err error
	if p.minLen, p.maxLen, err = bounds(d.MinLength, d.MaxLength, "Length"); err != nil {
		return nil, err
	}
	if p.minItems, p.maxItems, err = bounds(d.MinItems, d.MaxItems, "Items"); err != nil {
		return nil, err
	}
	if p.hasMin, p.min, err = intBound(d.Minimum, "minimum"); err != nil {
		return nil, err
	}
	if p.hasMax, p.max, err = intBound(d.Maximum, "maximum"); err != nil {
		return nil, err
	}
	if p.hasMin && p.hasMax && p.min > p.max {
		return nil, errors.New(`"minimum" is above "maximum"`)
	}
	if k == kindArray {
		if d.Items == nil {
			return nil, errors.New(`an array needs "items"`)
		}
		if inArray {
			return nil, errors.New("arrays of arrays are not supported")
		}
		if p.items, err = compileProp(d.Items, true); err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
	}
	return p, nil
}

func bounds(lo, hi *int, kw string) (int, int, error) {
	l, h := -1, -1
	if lo != nil {
		if *lo < 0 {
			return 0, 0, fmt.Errorf(`negative "min%s"`, kw)
		}
		l = *lo
	}
	if hi != nil {
		if *hi < 0 {
			return 0, 0, fmt.Errorf(`negative "max%s"`, kw)
		}
		h = *hi
	}
	if l >= 0 && h >= 0 && l > h {
		return 0, 0, fmt.Errorf(`"min%s" is above "max%s"`, kw, kw)
	}
	return l, h, nil
}

func intBound(f *float64, kw string) (bool, int64, error) {
	if f == nil {
		return false, 0, nil
	}
	if *f != math.Trunc(*f) || math.Abs(*f) > 1<<53 {
		return false, 0, fmt.Errorf("%q must be an integer within ±2^53", kw)
	}
	return true, int64(*f), nil
}

// strictDecode decodes one JSON object into v, refusing unknown keywords and trailing data.
func strictDecode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("parse schema: %w", err)
	}
	if dec.More() {
		return errors.New("parse schema: data after the object")
	}
	return nil
}

func kindName(k kind) string {
	for n, kk := range kindNames {
		if kk == k {
			return n
		}
	}
	return "unknown"
}
