package grant

import "testing"

// TestRedTeam4_ApproveHoldsCodeThatNamesNoProgram (approve rules): a
// program agora does not read whole, handed code in its arguments, can run git without
// spelling it; each of these pushes, and each is held by `git push *`. Calls whose arguments
// are only names, paths, options and numbers stay outside the rule, as do programs agora
// reads whole. Failed before: the first five ran unheld ("its arguments do not name git").
func TestRedTeam4_ApproveHoldsCodeThatNamesNoProgram(t *testing.T) {
	r := ApproveRule{Command: "git push *"}
	held := [][]string{
		{"python3", "-m", "timeit", "-s", "import subprocess; subprocess.run(['gi'+'t', 'push', 'r.git', 'HEAD:x'])", "pass"},
		{"python3", "-m", "timeit", "-s", "exec(bytes.fromhex('676974'))", "pass"},
		{"tar", "-cf", "/dev/null", ".", "--checkpoint=1", "--checkpoint-action=exec=$(printf gi)t push r.git HEAD:x"},
		{"tar", "-cf", "/dev/null", ".", "--checkpoint=1", "--checkpoint-action=exec=/usr/bin/gi? push r.git HEAD:x"},
		{"make", "--eval=x:;@$(subst Q,,gQit) push r.git HEAD:x", "x"},
		{"node", "--import=data:text/javascript,require('child_process').execSync('gi'+'t push')", "x.js"},
		{"node", "--import=data:text/javascript,import%7BexecSync%7Dfrom%22child_process%22", "x.js"},
		{"node", "--experimental-loader", "data:text/javascript,x", "x.js"},
		{"./run", "a b"},
	}
	for _, argv := range held {
		if p, out := r.Outside("run_command", argv); out {
			t.Errorf("not held: %q (%v)", argv, p.Steps)
		}
	}
	outside := [][]string{
		{"go", "test", "./..."},
		{"npm", "run", "build"},
		{"make", "-j4", "all"},
		{"python3", "-m", "pytest", "-x", "tests/unit"},
		{"node", "app.js", "--port=8080"},
		{"sed", "-i", "s/a b/c d/", "f.txt"},
		{"sed", "--sandbox", "e x", "f"},
		{"tar", "-czf", "out.tar.gz", "build/"},
	}
	for _, argv := range outside {
		if _, out := r.Outside("run_command", argv); !out {
			t.Errorf("held, want outside the rule: %q", argv)
		}
	}
}
