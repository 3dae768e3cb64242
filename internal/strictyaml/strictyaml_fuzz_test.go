package strictyaml_test

import (
	"errors"
	"testing"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// FuzzDecode decodes arbitrary bytes into a representative struct and into a free-form value:
// it must never panic, and every failure is a non-empty strictyaml.Errors whose entries carry a
// line that is never negative and a message.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		"",
		"version: 1\ntasks:\n  - name: a\n    depends_on: [b]\n    timeout: 5m\n    input: {x: [1, 2.5, true, ~]}\n",
		"labels: {a: b, a: c}\n",
		"tasks: &t [1]\nx: *t\n",
		"addr: ::1\nratio: 1e3\nsmall: 3\ntiny: -1\nptr: ~\nlock: {name: x, mode: shared}\n",
		"version: 1\n---\nversion: 2\n",
		"- [a, {b: c}]\n",
		"? [complex]\n: key\n",
		"!!binary aGk=\n",
		"tasks:\n\t- x\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var p plan
		check(t, src, &p)
		var v any
		check(t, src, &v)
	})
}

func check(t *testing.T, src []byte, out any) {
	_, err := strictyaml.Decode("fuzz.yaml", src, out)
	if err == nil {
		return
	}
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Decode error is %T, want strictyaml.Errors: %v", err, err)
	}
	if len(es) == 0 {
		t.Fatalf("Decode returned an empty Errors")
	}
	for _, e := range es {
		if e.Line < 0 || e.Msg == "" || e.File != "fuzz.yaml" {
			t.Fatalf("malformed error %+v", e)
		}
	}
}
