package grant

import (
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cmdread"
)

// FuzzApproveOutside reads arbitrary argvs against arbitrary rules. It must never panic, and:
//
//   - a call outside a rule has a proof: one step per command read, the argv's own first,
//     each with its reason;
//   - wrapping a held call in a wrapper agora reads (env, nice, timeout, find -exec, ...) or
//     adding an inert git option keeps it held: there is no way around a rule by wrapping.
func FuzzApproveOutside(f *testing.F) {
	for _, s := range [][2]string{
		{"git push *", "git\x00push\x00r.git\x00HEAD:x"},
		{"git push *", "git\x00-c\x00x.y=z\x00push"},
		{"git push *", "git\x00-c\x00alias.p=push\x00p"},
		{"git push *", "env\x00-u\x00X\x00git\x00push"},
		{"git push *", "find\x00.\x00-exec\x00git\x00{}\x00;"},
		{"git push *", "xargs\x00-I{}\x00git\x00{}"},
		{"git push *", "sh\x00-c\x00git push"},
		{"rm *.go", "rm\x00a/b.go"},
		{"npm publish", "npm\x00--registry\x00x\x00publish"},
		{"git **", "git"},
		{"python* -m pip *", "python3\x00-m\x00pip"},
	} {
		f.Add(s[0], s[1])
	}
	wrappers := [][]string{{"env"}, {"env", "-i"}, {"nice"}, {"nice", "-n", "1"}, {"nohup"},
		{"timeout", "5"}, {"command"}, {"stdbuf", "-o0"}, {"setsid"}, {"time"}, {"exec"},
		{"busybox"}, {"watch", "-x"}, {"sudo"}, {"xargs"}}
	f.Fuzz(func(t *testing.T, pattern, line string) {
		rule := ApproveRule{Command: pattern}
		if rule.Validate() != nil {
			return
		}
		argv := strings.Split(line, "\x00")
		if len(argv) > 32 {
			argv = argv[:32]
		}
		proof, outside := rule.Outside("run_command", argv)
		if outside {
			if len(proof.Steps) == 0 || !slices.Equal(proof.Steps[0].Argv, argv) {
				t.Fatalf("%q outside %q with proof %+v: want the argv itself as the first step", argv, pattern, proof)
			}
			for _, s := range proof.Steps {
				if s.Why == "" || len(s.Argv) == 0 {
					t.Fatalf("%q outside %q: a step without its reason: %+v", argv, pattern, s)
				}
			}
			return
		}
		if argv[0] == "" || strings.ContainsAny(argv[0][:1], "-+") || strings.Contains(argv[0], "=") {
			return // a wrapper would read it as its own option or a variable
		}
		for _, w := range wrappers {
			wrapped := slices.Concat(w, argv)
			if _, out := rule.Outside("run_command", wrapped); out {
				t.Fatalf("%q is held by %q, but %q is not", argv, pattern, wrapped)
			}
		}
		if !slices.Contains(argv, ";") && !slices.Contains(argv, "+") {
			wrapped := slices.Concat([]string{"find", ".", "-exec"}, argv, []string{";"})
			if _, out := rule.Outside("run_command", wrapped); out {
				t.Fatalf("%q is held by %q, but %q is not", argv, pattern, wrapped)
			}
		}
		if cmdread.ProgName(argv[0]) == "git" {
			for _, opt := range [][]string{{"-c", "user.name=x"}, {"-C", "."}, {"--no-pager"}, {"--git-dir=.git"}} {
				wrapped := slices.Concat(argv[:1], opt, argv[1:])
				if _, out := rule.Outside("run_command", wrapped); out {
					t.Fatalf("%q is held by %q, but %q is not", argv, pattern, wrapped)
				}
			}
		}
	})
}
