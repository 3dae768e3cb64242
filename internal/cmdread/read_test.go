package cmdread

import (
	"slices"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	tests := []struct {
		argv   []string
		want   [][]string // the commands read
		opaque string     // a substring of Opaque; "" for none
	}{
		{argv: []string{"git", "status"}, want: [][]string{{"git", "status"}}},
		{argv: []string{"env", "-u", "X", "nice", "-n", "5", "git", "push"}, want: [][]string{
			{"env", "-u", "X", "nice", "-n", "5", "git", "push"}, {"nice", "-n", "5", "git", "push"}, {"git", "push"}}},
		{argv: []string{"timeout", "-s", "KILL", "10", "git", "push"}, want: [][]string{{"timeout", "-s", "KILL", "10", "git", "push"}, {"git", "push"}}},
		{argv: []string{"sh", "-c", "git 'push' r"}, want: [][]string{{"sh", "-c", "git 'push' r"}, {"git", "push", "r"}}},
		{argv: []string{"bash", "-c", "-", "x"}, want: [][]string{{"bash", "-c", "-", "x"}, {"x"}}},
		{argv: []string{"find", ".", "-exec", "rm", "{}", ";", "-exec", "ls", "+"}, want: [][]string{
			{"find", ".", "-exec", "rm", "{}", ";", "-exec", "ls", "+"}, {"rm", "{}"}, {"ls"}}},
		{argv: []string{"sh", "-c", "a; b"}, opaque: "one simple command"},
		{argv: []string{"git", "-c", "alias.p=push", "p"}, opaque: "alias.p=push"},
		{argv: []string{"git", "p"}, opaque: "not a git builtin"},
		{argv: []string{"python3", "-c", "x"}, opaque: "inline code"},
		{argv: []string{"env", "PATH=.", "git"}, opaque: "env sets"},
		{argv: []string{"xargs", "sh"}, opaque: "input agora cannot see"},
		{argv: []string{"find", ".", "-exec", "{}", ";"}, opaque: "cannot know"},
		{argv: nil, opaque: "empty argv"},
	}
	for _, tt := range tests {
		r := Read(tt.argv)
		if tt.opaque != "" {
			if !strings.Contains(r.Opaque, tt.opaque) {
				t.Errorf("Read(%q).Opaque = %q, want it to say %q", tt.argv, r.Opaque, tt.opaque)
			}
			continue
		}
		if r.Opaque != "" {
			t.Errorf("Read(%q) is opaque: %s", tt.argv, r.Opaque)
			continue
		}
		var got [][]string
		for _, c := range r.Commands {
			got = append(got, c.Argv)
		}
		if !slices.EqualFunc(got, tt.want, slices.Equal) {
			t.Errorf("Read(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

// FuzzRead reads arbitrary argvs: it must never panic, and what it reads is well formed:
// the argv's own command first, every command with a program and one Known flag per word,
// never more commands than its limit.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"git\x00push", "env\x00-S\x00x", "sh\x00-c\x00git push", "find\x00.\x00-exec\x00{}\x00;",
		"xargs\x00-I{}\x00git\x00{}", "git\x00-c\x00a.b=c\x00config\x00alias.x\x00y", "python3\x00-Wd\x00-c\x00x", "sed\x00-n\x00e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		argv := strings.Split(line, "\x00")
		r := Read(argv)
		if len(r.Commands) > maxReadCommands {
			t.Fatalf("%d commands read, over the limit", len(r.Commands))
		}
		if r.Opaque == "" && (len(r.Commands) == 0 || !slices.Equal(r.Commands[0].Argv, argv)) {
			t.Fatalf("Read(%q): the argv itself is not the first command: %+v", argv, r.Commands)
		}
		for _, c := range r.Commands {
			if len(c.Argv) == 0 || len(c.Known) != len(c.Argv) {
				t.Fatalf("Read(%q): malformed command %+v", argv, c)
			}
			if c.Git != nil && len(c.Git.Known) != len(c.Git.Args) {
				t.Fatalf("Read(%q): malformed git call %+v", argv, c.Git)
			}
		}
	})
}
