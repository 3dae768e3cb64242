package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedTeam29_OddHomesCreateNothing: only 'agora init' creates a
// home, and a refusal creates nothing, wherever AGORA_HOME points: at a regular file, at a
// dangling symbolic link (its target must not appear), at a missing directory beneath a
// symbolically linked parent (the real parent stays empty), through a file (file/home). Every
// command of the tree is run with a command line that is right; each that needs a home
// refuses naming the path, and none writes anything there, through the link, or into $HOME.
func TestRedTeam29_OddHomesCreateNothing(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(dir, "caps", "tools", "capability.yaml"): "commands: [\"sh -c *\"]\n",
		filepath.Join(dir, "agora-manifest.yaml"):              "version: 1\ncapabilities:\n  - name: tools\n    from: caps/tools\n",
		filepath.Join(dir, "plan.yaml"):                        "version: 1\nname: tree\ntasks:\n  - id: only\n    subagent: lint\n",
		filepath.Join(dir, "agents", "helper.md"):              "---\nname: helper\ndescription: helps\ntools: Read\n---\nYou help.\n",
		filepath.Join(dir, "bundle.json"):                      "{}\n",
		filepath.Join(dir, "afile"):                            "keep\n",
	})
	initRepo(t, filepath.Join(dir, "repo"))
	odd := filepath.Join(dir, "odd")
	real := filepath.Join(odd, "realparent")
	userHome := filepath.Join(odd, "user")
	for _, d := range []string{real, userHome} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(odd, "target-missing"), filepath.Join(odd, "dangle")))
	must(os.Symlink(real, filepath.Join(odd, "linkparent")))
	homes := map[string]string{
		"a regular file":           filepath.Join(dir, "afile"),
		"a dangling link":          filepath.Join(odd, "dangle"),
		"beneath a linked parent":  filepath.Join(odd, "linkparent", "home"),
		"through a file":           filepath.Join(dir, "afile", "home"),
		"a dangling link's subdir": filepath.Join(odd, "dangle", "home"),
	}
	free := map[string]bool{"init": true, "version": true, "help": true, "completion": true, "doctor": true, "verify": true, "orch validate": true,
		"restore": true} // restore writes into --to, never AGORA_HOME: its own tests hold that
	args := missingHomeArgs(dir)
	untouched := func(what, name string) {
		t.Helper()
		if b, err := os.ReadFile(filepath.Join(dir, "afile")); err != nil || string(b) != "keep\n" {
			t.Fatalf("AGORA_HOME %s: agora %s changed the file (%q, %v)", what, name, b, err)
		}
		if _, err := os.Lstat(filepath.Join(odd, "target-missing")); err == nil {
			t.Fatalf("AGORA_HOME %s: agora %s created the dangling link's target", what, name)
		}
		for _, d := range []string{real, userHome} {
			if ents, _ := os.ReadDir(d); len(ents) != 0 {
				t.Fatalf("AGORA_HOME %s: agora %s wrote %s into %s", what, name, ents[0].Name(), d)
			}
		}
	}
	for what, agoraHome := range homes {
		env := map[string]string{"AGORA_HOME": agoraHome, "HOME": userHome, "USER": "tester"}
		for _, c := range commandTree(t) {
			name := strings.Join(argv(c), " ")
			if !c.Runnable() || c.HasSubCommands() || name == "init" || c.DisableFlagParsing {
				continue
			}
			r := runAgora(t, env, argv(c, args[name]...)...)
			if !free[name] && (r.code == 0 || !strings.Contains(r.stderr, agoraHome)) {
				t.Errorf("AGORA_HOME %s: agora %s: exit %d, want a refusal naming %s\n%s", what, name, r.code, agoraHome, r.stderr)
			}
			untouched(what, name)
		}
	}
}
