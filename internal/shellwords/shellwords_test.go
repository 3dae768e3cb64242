package shellwords_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/shellwords"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		err      string // a part of the error; "" when want is the argv
	}{
		{"plain", "git status", []string{"git", "status"}, ""},
		{"blanks", " \tgit  \t status ", []string{"git", "status"}, ""},
		{"single quotes keep everything", `printf '%s\n' 'a "b" $c ; d'`, []string{"printf", `%s\n`, `a "b" $c ; d`}, ""},
		{"empty quoted words count", `touch '' ""`, []string{"touch", "", ""}, ""},
		{"quotes join a word", `a'b'"c"d`, []string{"abcd"}, ""},
		// What Codex 0.169.0 reports for a script holding a single quote.
		{"double-quoted script", `/usr/bin/bash -lc "printf '%s\\n' 'LINE' > NOTES.md && cat NOTES.md"`,
			[]string{"/usr/bin/bash", "-lc", `printf '%s\n' 'LINE' > NOTES.md && cat NOTES.md`}, ""},
		{"double quotes: backslash escapes $ ` \" \\", "echo \"\\$ \\` \\\" \\\\\"", []string{"echo", "$ ` \" \\"}, ""},
		{"double quotes: backslash stays before others", `echo "\a\n\'"`, []string{"echo", `\a\n\'`}, ""},
		{"double quotes: line continuation", "echo \"a\\\nb\"", []string{"echo", "ab"}, ""},
		{"double quotes: newline is literal", "echo \"a\nb\"", []string{"echo", "a\nb"}, ""},
		{"double quotes: glob and operators literal", `echo "* ; | > ~ { ! #"`, []string{"echo", "* ; | > ~ { ! #"}, ""},
		{"backslash outside quotes", `echo a\ b \; \$x \\`, []string{"echo", "a b", ";", "$x", `\`}, ""},
		{"line continuation outside quotes", "git sta\\\ntus", []string{"git", "status"}, ""},
		{"hash inside a word", "echo a#b", []string{"echo", "a#b"}, ""},
		{"equals after the program", "git -c a=b status", []string{"git", "-c", "a=b", "status"}, ""},
		{"quoted reserved word is a program", `"time" x`, []string{"time", "x"}, ""},
		{"reserved word later is an argument", "echo if then", []string{"echo", "if", "then"}, ""},
		{"utf-8", "echo héllo", []string{"echo", "héllo"}, ""},

		{"empty", "", nil, "empty"},
		{"blank", " \t ", nil, "empty"},
		{"sequence", "git status; rm -rf /", nil, `operator ';'`},
		{"and", "git status && rm -rf /", nil, `operator '&'`},
		{"pipe", "git status | sh", nil, `operator '|'`},
		{"background", "sleep 1 &", nil, `operator '&'`},
		{"redirection", "echo x > y", nil, `redirection '>'`},
		{"input redirection", "cat < /etc/passwd", nil, `redirection '<'`},
		{"command substitution", "touch $(id)", nil, `expansion '$'`},
		{"backquotes", "touch `id`", nil, "expansion '`'"},
		{"variable", "echo $HOME", nil, `expansion '$'`},
		{"variable in double quotes", `echo "$HOME"`, nil, `expansion '$' inside double quotes`},
		{"backquote in double quotes", "echo \"`id`\"", nil, "inside double quotes"},
		{"glob", "rm *", nil, `glob '*'`},
		{"question glob", "rm ?", nil, `glob '?'`},
		{"bracket glob", "rm [a]", nil, `glob '['`},
		{"brace expansion", "touch {a,b}", nil, "brace"},
		{"tilde", "cat ~/x", nil, "tilde"},
		{"tilde after =", "echo --x=~", nil, "tilde"},
		{"subshell", "(git status)", nil, "subshell"},
		{"negation", "! git status", nil, "negation"},
		{"comment", "git status #x", nil, "comment"},
		{"newline", "git status\nrm -rf /", nil, "newline"},
		{"assignment", "LD_PRELOAD=/x.so git status", nil, "assignment"},
		{"reserved word", "time git push", nil, `reserved word "time"`},
		{"reserved word through a continuation", "ti\\\nme git push", nil, `reserved word "time"`},
		{"if", "if true", nil, "reserved word"},
		{"single quote open", "echo 'x", nil, "single quote left open"},
		{"double quote open", `echo "x`, nil, "double quote left open"},
		{"double quote open after a backslash", `echo "x\`, nil, "double quote left open"},
		{"trailing backslash", `echo x\`, nil, "backslash at the end"},
		{"NUL", "echo a\x00b", nil, "NUL"},
		{"NUL quoted", "echo 'a\x00b'", nil, "NUL"},
		{"NUL double-quoted", "echo \"a\x00b\"", nil, "NUL"},
		{"NUL escaped", "echo a\\\x00", nil, "NUL"},
		{"carriage return", "git status\r", nil, "control character"},
		{"vertical tab", "git\vstatus", nil, "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := shellwords.Split(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Split(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("Split(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestSplit_ErrorTypes(t *testing.T) {
	if _, err := shellwords.Split(""); !errors.Is(err, shellwords.ErrEmpty) {
		t.Errorf("empty line: %v, want ErrEmpty", err)
	}
	_, err := shellwords.Split("git status; x")
	var se *shellwords.Error
	if !errors.As(err, &se) || se.Offset != 10 {
		t.Errorf("error = %#v, want an *Error at byte 10", err)
	}
	if _, err := shellwords.Split(strings.Repeat("a", shellwords.MaxLine+1)); err == nil {
		t.Error("a line over MaxLine was split")
	}
}

// TestSplit_AgreesWithShells runs every line Split accepts, from a table and from a random
// generator over the bytes that matter to a shell, through the real bash and dash (as the
// arguments of printf) and compares the words they pass with Split's.
func TestSplit_AgreesWithShells(t *testing.T) {
	lines := []string{
		`a 'b c' "d e"`, "\"\\$\\`\\\"\\\\\\a\"", "a\\\nb", "\"a\\\nb\"", `a\ b\'c`, `x"y"'z'`, `'' ""`,
		`"*?[]{}~!#;&|<>()"`, `a#b c=d`, `"a'b" 'a"b'`, `"\\n"`, `\\\\`, `"\"'"`,
	}
	rng := rand.New(rand.NewPCG(26, 2))
	alphabet := []string{"a", "b", " ", "\t", "'", `"`, `\`, "\n", "#", "=", "-", "%", "é", "$", "*", ";"}
	for len(lines) < 12000 {
		var b strings.Builder
		for n := rng.IntN(12) + 1; n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		lines = append(lines, b.String())
	}
	var script strings.Builder
	var want [][]string
	for _, l := range lines {
		words, err := shellwords.Split(l)
		if err != nil {
			continue
		}
		// Each line's words are printed NUL-terminated, then a lone \x01 ends the line.
		script.WriteString("printf '%s\\0' " + l + "\nprintf '\\001\\0'\n")
		want = append(want, words)
	}
	if len(want) < 1000 {
		t.Fatalf("only %d generated lines are simple commands; the generator is off", len(want))
	}
	for _, sh := range []string{"/bin/bash", "/bin/dash"} {
		if _, err := os.Stat(sh); err != nil {
			t.Logf("SKIP %s: not installed", sh)
			continue
		}
		t.Run(sh, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), sh, "-c", script.String())
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", sh, err)
			}
			got := [][]string{{}}
			for _, w := range bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
				if string(w) == "\x01" {
					got = append(got, []string{})
					continue
				}
				got[len(got)-1] = append(got[len(got)-1], string(w))
			}
			got = got[:len(got)-1]
			if len(got) != len(want) {
				t.Fatalf("%s printed %d lines, want %d", sh, len(got), len(want))
			}
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("%s reads %q, Split reads %q", sh, got[i], want[i])
				}
			}
		})
	}
}
