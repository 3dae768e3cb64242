package claudert

import (
	"encoding/json"
	"errors"
	"fmt"
)

// object is one JSON object's members by their exact names. encoding/json matches struct
// fields case-insensitively, so events are read through object instead: "tYpe" is not "type".
type object map[string]json.RawMessage

// decodeObject decodes a JSON object (null is not one).
func decodeObject(b []byte) (object, error) {
	var o object
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	if o == nil {
		return nil, errors.New("not a JSON object")
	}
	return o, nil
}

// field decodes member key into dst, which MUST be a string, bool, number, object,
// json.RawMessage or a slice of those (never a struct). It reports whether the member is
// present and not null.
func (o object) field(key string, dst any) (bool, error) {
	raw, ok := o[key]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return true, fmt.Errorf("field %s: %w", key, err)
	}
	return true, nil
}
