// Package fanoutitems reads a fan-out's list: the JSON array a producer task leaves in its
// outputs, one task per item. It runs on the host, over a file an agent wrote (so anything
// may reach it); it imports [plan] for the item limits and keys, [jcs] and [strictjson], and
// lives apart from the orchestrator engine so its fuzz target builds without the engine's
// import graph.
package fanoutitems

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/strictjson"
)

// MaxBytes caps a fan-out list file: every item is kept in orch.db with the run, and a
// list is read whole before any task is added.
const MaxBytes = 8 << 20

// Item is one element of a fan-out list: the task it becomes is the fan-out's ID[Key].
type Item struct {
	Key   string          // the item's "id" when it is an object with one, else its 0-based index
	Value json.RawMessage // the item in RFC 8785 canonical form
}

// Decode reads a fan-out list exactly: one JSON array (strictjson: valid UTF-8, no key
// twice in an object, not even in another case), at most [plan.MaxFanOutItems] items, each
// with a canonical form (integers within ±2^53). An object item's "id", when present, must be
// a string that is a valid task id segment ([plan.ValidItemKey]); other items are keyed by
// their index, and no two items may have the same key. Anything else is refused whole, with
// the reason: a list is never cut or partly used.
func Decode(b []byte) ([]Item, error) {
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%d bytes; at most %d", len(b), MaxBytes)
	}
	if err := strictjson.Check(b); err != nil {
		return nil, fmt.Errorf("not one exact JSON document: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, fmt.Errorf("want a JSON list of items, got %s", kindOf(tok))
	}
	var items []Item
	seen := map[string]int{}
	for i := 0; dec.More(); i++ {
		if i == plan.MaxFanOutItems {
			n := i
			for ; dec.More(); n++ {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return nil, err
				}
			}
			return nil, fmt.Errorf("%d items; at most %d", n, plan.MaxFanOutItems)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		canon, err := jcs.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w (write other numbers as strings)", i, err)
		}
		key := strconv.Itoa(i)
		if m, ok := v.(map[string]any); ok {
			if id, has := m["id"]; has {
				s, isString := id.(string)
				switch {
				case !isString:
					return nil, fmt.Errorf("item %d: its id is %s; want a string", i, kindOf(id))
				case !plan.ValidItemKey(s):
					return nil, fmt.Errorf("item %d: id %q cannot name a task: use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit", i, clip(s))
				}
				key = s
			}
		}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("items %d and %d have the same key %q (an item's id, else its index): each item names one task", first, i, key)
		}
		seen[key] = i
		items = append(items, Item{Key: key, Value: canon})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return items, nil
}

// kindOf names a decoded JSON value's type for a message.
func kindOf(v any) string {
	switch v.(type) {
	case json.Delim:
		if v == json.Delim('{') {
			return "an object"
		}
		return "a list"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// clip cuts an untrusted string for a message.
func clip(s string) string {
	const most = 80
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}
