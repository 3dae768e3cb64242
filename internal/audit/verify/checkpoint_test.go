package verify_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
)

var root = bytes.Repeat([]byte{7}, 32)

const root64 = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="

func TestParseCheckpoint(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *verify.Checkpoint // nil: must fail
	}{
		{"valid", "agora/ab/agora.db\n42\n" + root64 + "\n", &verify.Checkpoint{Origin: "agora/ab/agora.db", Size: 42, Hash: root}},
		{"size zero", "o\n0\n" + root64 + "\n", &verify.Checkpoint{Origin: "o", Size: 0, Hash: root}},
		{"leading zero", "o\n042\n" + root64 + "\n", nil},
		{"signed size", "o\n+42\n" + root64 + "\n", nil},
		{"size overflow", "o\n18446744073709551616\n" + root64 + "\n", nil},
		{"extension line", "o\n42\n" + root64 + "\nextra\n", nil},
		{"no final newline", "o\n42\n" + root64, nil},
		{"empty origin", "\n42\n" + root64 + "\n", nil},
		{"origin with trailing space", "o \n42\n" + root64 + "\n", nil},
		{"short hash", "o\n42\nBwcH\n", nil},
		{"unpadded hash", "o\n42\n" + strings.TrimSuffix(root64, "=") + "\n", nil},
		{"non-canonical base64", "o\n42\n" + root64[:42] + "d=\n", nil},
		{"CRLF", "o\r\n42\r\n" + root64 + "\r\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := verify.ParseCheckpoint([]byte(tt.body))
			if tt.want == nil {
				if !errors.Is(err, verify.ErrCheckpoint) {
					t.Errorf("got %+v, %v; want ErrCheckpoint", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(*tt.want, got); diff != "" {
				t.Errorf("checkpoint (-want +got):\n%s", diff)
			}
			if string(got.Marshal()) != tt.body {
				t.Errorf("Marshal: got %q, want %q", got.Marshal(), tt.body)
			}
		})
	}
}

func TestOpenCheckpoint(t *testing.T) {
	s, vkey := audittest.NewKey(t)
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	origin := verify.Origin(s.Name(), "agora.db")
	signed, err := verify.SignCheckpoint(verify.Checkpoint{Origin: origin, Size: 3, Hash: root}, s)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := verify.OpenCheckpoint(signed, v, origin); err != nil || c.Size != 3 {
		t.Fatalf("got %+v, %v; want size 3", c, err)
	}
	other, otherPub := audittest.NewKey(t)
	ov, _ := note.NewVerifier(otherPub)
	cosigned, _ := note.Sign(&note.Note{Text: string(signed[:bytes.Index(signed, []byte("\n\n"))+1])}, s, other)
	sigLine := signed[bytes.Index(signed, []byte("\n\n"))+2:]
	tests := []struct {
		name   string
		signed []byte
		v      note.Verifier
		origin string
		want   string
	}{
		{"another key", signed, ov, origin, "not signed by key"},
		{"another origin", signed, v, origin + "x", "origin"},
		{"a second signature", cosigned, v, origin, "want exactly one signature"},
		{"the signature twice", append(bytes.Clone(signed), sigLine...), v, origin, "not in canonical form"},
		{"body changed", bytes.Replace(signed, []byte("\n3\n"), []byte("\n4\n"), 1), v, origin, "invalid signature"},
		{"not a note", []byte("hello"), v, origin, "malformed note"},
		{"too large", bytes.Repeat([]byte("a"), verify.MaxCheckpointSize+1), v, origin, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verify.OpenCheckpoint(tt.signed, tt.v, tt.origin)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParseCheckpoint: the parser never panics, and what it accepts is in canonical form
// (it marshals back to the same bytes).
func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte("agora/ab/agora.db\n42\n" + root64 + "\n"))
	f.Add([]byte("o\n0\n" + root64 + "\n"))
	f.Add([]byte("o\n042\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\nx\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := verify.ParseCheckpoint(body)
		if err != nil {
			return
		}
		if !bytes.Equal(c.Marshal(), body) {
			t.Errorf("accepted %q, which marshals to %q", body, c.Marshal())
		}
	})
}
