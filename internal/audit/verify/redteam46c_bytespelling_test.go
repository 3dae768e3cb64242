package verify

import (
	"bytes"
	"encoding/base64"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// "a byte string has one spelling". encoding/json reads a []byte field
// not only from a base64 string but also from a JSON array of numbers ([70,15,...]): a second
// spelling of the same bytes. Each forgery below keeps every decoded byte of the valid bundle
// and changes its text; the secure behaviour is that ParseBundleBytes refuses it.

// rt46cNumbers spells the bytes of the quoted base64 text q as a JSON array of numbers.
func rt46cNumbers(t *testing.T, q string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(strings.Trim(q, `"`))
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]string, len(raw))
	for i, c := range raw {
		parts[i] = strconv.Itoa(int(c))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// rt46cQuoted returns the first quoted string value after key in b ("key": "...").
func rt46cQuoted(t *testing.T, b []byte, key string) string {
	t.Helper()
	i := bytes.Index(b, []byte(`"`+key+`": "`))
	if i < 0 {
		t.Fatalf("fixture: no %s", key)
	}
	i += len(`"` + key + `": `)
	j := i + 1 + bytes.IndexByte(b[i+1:], '"')
	return string(b[i : j+1])
}

func TestRedTeam46c_ByteStringAsNumberArray(t *testing.T) {
	valid, err := os.ReadFile("testdata/bundle-pre28.json")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile("testdata/audit-pre28.pub")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Key: string(key)}
	orig, err := ParseBundleBytes(valid)
	if err != nil || !Verify(orig, opts).OK {
		t.Fatalf("fixture does not verify: %v", err)
	}
	cases := []struct {
		name string
		edit func(t *testing.T, b []byte) []byte
	}{
		{"leaf hash as numbers", func(t *testing.T, b []byte) []byte {
			return replaceOnce(t, b, rt30Leaf0, rt46cNumbers(t, rt30Leaf0))
		}},
		{"proof hash as numbers", func(t *testing.T, b []byte) []byte {
			return replaceOnce(t, b, rt30Proof01, rt46cNumbers(t, rt30Proof01))
		}},
		{"entry as numbers", func(t *testing.T, b []byte) []byte {
			q := rt46cQuoted(t, b, "entry")
			return replaceOnce(t, b, q, rt46cNumbers(t, q))
		}},
		{"checkpoint as numbers", func(t *testing.T, b []byte) []byte {
			q := rt46cQuoted(t, b, "checkpoint")
			return replaceOnce(t, b, q, rt46cNumbers(t, q))
		}},
		{"selection note as numbers", func(t *testing.T, b []byte) []byte {
			q := rt46cQuoted(t, b, "selection_note")
			return replaceOnce(t, b, q, rt46cNumbers(t, q))
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := c.edit(t, bytes.Clone(valid))
			if bytes.Equal(data, valid) {
				t.Fatal("the forgery changed nothing")
			}
			matchStrict(t, i, data)
			b, err := ParseBundleBytes(data)
			if err != nil {
				return // refused: held
			}
			same := reflect.DeepEqual(b, orig)
			t.Errorf("a byte string spelled as a JSON array of numbers was accepted (same parsed bundle: %v, verify OK: %v): one value, two spellings", same, Verify(b, opts).OK)
		})
	}
}
