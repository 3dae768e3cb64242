package worker

import (
	"os"
	"strconv"
	"syscall"
)

// trustWorkspaceRoot lets the agent's git work in the workspace when the workspace's own
// directory belongs to another user than the one the agent runs as. A Kubernetes pod's
// workspace is an emptyDir's mount point, which the kubelet makes root's (with the pod's
// fsGroup); everything in it, .git included, is the pod's uid's, written by its fetch step.
// git would refuse the checkout as of "dubious ownership" for its top directory alone, so
// the workspace, by its exact path and nothing under or beside it, is named in
// safe.directory. That check guards a user against a repository another user wrote; this
// one is the dispatch's own checkout. Where the workspace is the agent's (bubblewrap and
// docker, whose stage is handed to the sandbox uid), nothing is added. safe.directory is read
// only from protected configuration, which GIT_CONFIG_COUNT is (command-line scope).
func trustWorkspaceRoot(env map[string]string, workspace string) {
	fi, err := os.Stat(workspace)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() {
		return
	}
	addGitConfig(env, "safe.directory", workspace)
}

// addGitConfig appends one command-line-scope git setting to env, after any pairs the env
// bundle set (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n).
func addGitConfig(env map[string]string, key, value string) {
	n, err := strconv.Atoi(env["GIT_CONFIG_COUNT"])
	if err != nil || n < 0 || n > 1000 {
		n = 0
	}
	env["GIT_CONFIG_KEY_"+strconv.Itoa(n)] = key
	env["GIT_CONFIG_VALUE_"+strconv.Itoa(n)] = value
	env["GIT_CONFIG_COUNT"] = strconv.Itoa(n + 1)
}
