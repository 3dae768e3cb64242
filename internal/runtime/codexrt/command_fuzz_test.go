package codexrt

import "testing"

// FuzzCommandArgv: a line a shell would treat as more than one simple command never yields
// an inner argv form; nothing panics.
func FuzzCommandArgv(f *testing.F) {
	for _, s := range []string{"/bin/bash -lc 'git status'", "/bin/bash -lc 'a; b'", `/bin/bash -lc "x $(y)"`, "a 'b'\"c\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, argv := range CommandArgv(s) {
			if len(argv) == 0 {
				t.Error("empty argv form")
			}
		}
		if CommandAllowed([]string{"git status"}, s) {
			forms := CommandArgv(s)
			if len(forms) == 0 {
				t.Error("allowed with no forms")
			}
		}
	})
}
