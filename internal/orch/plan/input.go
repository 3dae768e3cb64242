package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/jcs"
)

// maxExactInt is the largest integer every JSON reader's IEEE 754 double holds exactly; the
// canonical form (RFC 8785, as jcs writes it) allows no other numbers.
const maxExactInt = 1 << 53

// canonicalInput is a task's decoded input already made canonical by canonicalInputs.
type canonicalInput json.RawMessage

// canonicalInputs replaces each task's decoded input that has no problem by its canonical
// JSON, before the plan's tasks are allocated: a decoded input is a map (about 400 bytes for
// the smallest object), so a large plan's would otherwise be alive beside its tasks. An input
// with a problem keeps its map, for [validator.input] to report in the task's turn, so the
// problems and their order are those of a single pass.
func (v *validator) canonicalInputs(docs []*taskDoc) {
	quiet := &validator{full: true} // counts problems (more), never places one
	for _, d := range docs {
		m, ok := d.Input.(map[string]any)
		if !ok {
			continue
		}
		quiet.more = 0
		if !quiet.inputValue(&inputPath{}, m) || quiet.more > 0 {
			continue
		}
		b, err := jcs.Marshal(m)
		if err != nil || len(b) > MaxInputSize {
			continue
		}
		d.Input = canonicalInput(bytes.Clone(b)) // its own length: the encoder's buffer is 64 bytes or more
	}
}

// input checks a task's input, a JSON object, and returns it in canonical form.
func (v *validator) input(path string, in any) json.RawMessage {
	if in == nil {
		return nil
	}
	if c, ok := in.(canonicalInput); ok {
		return json.RawMessage(c)
	}
	m, ok := in.(map[string]any)
	if !ok {
		v.add(path, "want a JSON object, got %s", describeValue(in))
		return nil
	}
	if !v.inputValue(&inputPath{base: path}, m) {
		return nil
	}
	b, err := jcs.Marshal(m)
	if err != nil {
		v.add(path, "%v", err)
		return nil
	}
	if len(b) > MaxInputSize {
		v.add(path, "%d bytes in canonical JSON; at most %d", len(b), MaxInputSize)
		return nil
	}
	return bytes.Clone(b) // its own length: the encoder's buffer is 64 bytes or more
}

// inputPath is the path of a value inside an input, turned into a string only for an error.
type inputPath struct {
	parent *inputPath
	base   string // the input's own path (root only)
	key    string
	index  int // -1 for a mapping key
}

func (p *inputPath) String() string {
	switch {
	case p.parent == nil:
		return p.base
	case p.index >= 0:
		return p.parent.String() + "[" + strconv.Itoa(p.index) + "]"
	}
	return p.parent.String() + "." + p.key
}

// inputValue checks what the canonical form and a re-read of it need: integers within ±2^53
// and strings a YAML reader takes back unchanged. The decoder caps the nesting, so the
// recursion is bounded.
func (v *validator) inputValue(p *inputPath, x any) bool {
	switch x := x.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x)) // problems in a stable order
		ok := true
		for _, k := range keys {
			sub := &inputPath{parent: p, key: k, index: -1}
			if r, bad := unreadable(k); bad {
				v.add(sub.String(), "key holds %U, which a plan cannot carry", r)
				ok = false
			}
			ok = v.inputValue(sub, x[k]) && ok
		}
		return ok
	case []any:
		ok := true
		for i, e := range x {
			ok = v.inputValue(&inputPath{parent: p, index: i}, e) && ok
		}
		return ok
	case string:
		if r, bad := unreadable(x); bad {
			v.add(p.String(), "string holds %U, which a plan cannot carry", r)
			return false
		}
	case int64:
		if x > maxExactInt || x < -maxExactInt {
			v.add(p.String(), "%s", numberProblem(strconv.FormatInt(x, 10)))
			return false
		}
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > maxExactInt {
			v.add(p.String(), "%s", numberProblem(strconv.FormatFloat(x, 'g', -1, 64)))
			return false
		}
	}
	return true
}

func numberProblem(got string) string {
	return fmt.Sprintf("want an integer within ±2^53 (write other numbers as strings), got %s", got)
}

// unreadable finds a character that the canonical JSON would carry raw but a YAML reader
// refuses (DEL, C1 controls, U+FFFE, U+FFFF) or reads as a line break (U+0085), so the plan
// would not read back the same. C0 controls are fine: the canonical form escapes them.
func unreadable(s string) (rune, bool) {
	if !utf8.ValidString(s) {
		return utf8.RuneError, true
	}
	for _, r := range s {
		if (r >= 0x7f && r <= 0x9f) || r == 0xfffe || r == 0xffff {
			return r, true
		}
	}
	return 0, false
}
