package mcpserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	tokA = "aaaaaaaa-0123456789abcdef0123456789abcdef"
	tokB = "bbbbbbbb-0123456789abcdef0123456789abcdef"
)

func TestParseClients(t *testing.T) {
	tests := []struct {
		name, src string
		want      []Client
		err       string
	}{
		{"yaml", "- name: ci\n  token: " + tokA + "\n  ceiling: read\n- {name: planner, token: " + tokB + ", ceiling: orchestrate}\n",
			[]Client{{"ci", tokA, CeilingRead}, {"planner", tokB, CeilingOrchestrate}}, ""},
		{"json", `[{"name":"ci","token":"` + tokA + `","ceiling":"dispatch"}]`, []Client{{"ci", tokA, CeilingDispatch}}, ""},
		{"empty", "", nil, "lists no clients"},
		{"empty list", "[]", nil, "lists no clients"},
		{"no ceiling", "- {name: ci, token: " + tokA + "}", nil, "ceiling is required"},
		{"bad ceiling", "- {name: ci, token: " + tokA + ", ceiling: admin}", nil, "ceiling must be read, dispatch or orchestrate"},
		{"short token", "- {name: ci, token: short, ceiling: read}", nil, "at least 32 are required"},
		{"bad name", "- {name: CI Bot, token: " + tokA + ", ceiling: read}", nil, "name must be"},
		{"same name", "- {name: ci, token: " + tokA + ", ceiling: read}\n- {name: ci, token: " + tokB + ", ceiling: read}", nil, `"ci" is listed twice`},
		{"same token", "- {name: a, token: " + tokA + ", ceiling: read}\n- {name: b, token: " + tokA + ", ceiling: read}", nil, "share a token"},
		{"unknown field", "- {name: ci, token: " + tokA + ", ceiling: read, scope: all}", nil, "unknown field"},
		{"duplicate key", "- {name: ci, token: " + tokA + ", token: " + tokB + ", ceiling: read}", nil, "duplicate key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseClients("tokens.yaml", []byte(tt.src))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), tokA) || strings.Contains(err.Error(), tokB) {
					t.Errorf("the error echoes a token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("clients (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseClients_NeverEchoesATokenInTheWrongPlace puts tokens where the decoder complains
// about them: its messages quote such values, and they must not reach the error.
func TestParseClients_NeverEchoesATokenInTheWrongPlace(t *testing.T) {
	for _, src := range []string{
		"- " + tokA + "\n",
		"name: ci\ntoken: " + tokA + "\n",
		"- {name: ci, token: [" + tokA + "], ceiling: read}\n",
		"- {name: ci, token: {v: " + tokA + "}, ceiling: read}\n",
		"- {name: ci, " + tokA + ": x, ceiling: read}\n",
		"- {name: ci, token: " + tokA + ", ceiling: " + tokB + "}\n",
		"- {name: " + tokA + tokA + tokA + ", token: " + tokB + ", ceiling: read}\n",
		"- {name: ci, token: \"" + tokA + "\n",
		"- {name: ci, token: &a " + tokA + ", ceiling: read}\n",
	} {
		_, err := ParseClients("tokens.yaml", []byte(src))
		if err == nil {
			t.Errorf("accepted %q", src)
			continue
		}
		if strings.Contains(err.Error(), tokA) || strings.Contains(err.Error(), tokB) || strings.Contains(err.Error(), tokA[:20]) {
			t.Errorf("the error for %q echoes a token: %v", src, err)
		}
	}
}

func TestClient_NeverPrintsItsToken(t *testing.T) {
	c := Client{Name: "ci", Token: tokA, Ceiling: CeilingRead}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q", c, c, c, c, c), c.String(), fmt.Sprint([]Client{c})} {
		if strings.Contains(s, tokA) {
			t.Errorf("printed %q", s)
		}
	}
}

func TestCheckBind(t *testing.T) {
	tests := []struct {
		addr     string
		allowAny bool
		want     error // nil, ErrExposedBind, or errAddr
	}{
		{"127.0.0.1:8765", false, nil},
		{"[::1]:8765", false, nil},
		{"localhost:0", false, nil},
		{"0.0.0.0:8765", false, ErrExposedBind},
		{"[::]:8765", false, ErrExposedBind},
		{":8765", false, ErrExposedBind},
		{"127.0.0.1.nip.io:8765", false, ErrExposedBind},
		{"LOCALHOST:8765", false, ErrExposedBind},
		{"0.0.0.0:8765", true, nil},
		{"127.0.0.1", false, errAddr},
		{"127.0.0.1:", false, errAddr},
	}
	for _, tt := range tests {
		err := CheckBind(tt.addr, tt.allowAny)
		switch {
		case tt.want == nil && err != nil, tt.want == ErrExposedBind && !errors.Is(err, ErrExposedBind),
			tt.want == errAddr && (err == nil || errors.Is(err, ErrExposedBind)):
			t.Errorf("CheckBind(%q, %v) = %v, want %v", tt.addr, tt.allowAny, err, tt.want)
		}
	}
}

var errAddr = errors.New("a malformed address")

// FuzzParseClients: any bytes as a tokens file. Never a panic; anything accepted is a valid,
// unambiguous client set.
func FuzzParseClients(f *testing.F) {
	f.Add([]byte("- {name: ci, token: " + tokA + ", ceiling: read}\n"))
	f.Add([]byte(`[{"name":"a","token":"` + tokA + `","ceiling":"orchestrate"},{"name":"b","token":"` + tokB + `","ceiling":"dispatch"}]`))
	f.Add([]byte("- name: x\n  token: 0\n  ceiling: read\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		cs, err := ParseClients("f.yaml", src)
		if err != nil {
			return
		}
		if err := checkClients(cs); err != nil {
			t.Fatalf("accepted an invalid client set: %v", err)
		}
		for _, c := range cs {
			if !clientNameRE().MatchString(c.Name) || CheckToken(c.Token) != nil {
				t.Fatalf("accepted client %q", c.Name)
			}
		}
	})
}
