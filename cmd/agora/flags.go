package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/strictjson"
)

// runFlags is what `agora dispatch run` was given, for the flags the front reads itself.
type runFlags struct {
	subagent, target, input, repo, workspace, rev, callback, output string
	envs                                                            []string
	timeout                                                         time.Duration
	detach, progress, learn                                         bool
}

// Kinds of flag the front reads: a value, or a bare switch.
const (
	valueFlag = iota
	switchFlag
)

// frontFlag says what kind of flag of `agora dispatch run` name is, for the flags the front
// reads exactly as the whole program (cobra/pflag) does. Any other flag (--help, --actor,
// --in-process, --tools, --budget-*, --verify, ...) leaves the command line to the whole
// program.
func frontFlag(name string) (int, bool) {
	switch name {
	case "subagent", "env", "target", "input", "repo", "workspace", "timeout", "callback", "output":
		return valueFlag, true
	case "detach", "progress", "learn":
		return switchFlag, true
	}
	return 0, false
}

// parseRun reads the arguments after `dispatch run`, or says (false) that the whole program
// must: a form the front does not read (--flag=value of a switch, -ojson, a repeated flag, an
// argument, --), an input it would not send as the whole program does (@FILE, malformed
// JSON), a relative --repo, or a usage error (the whole program says it).
func parseRun(args []string) (*runFlags, bool) {
	vals := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var name, val string
		hasVal := false
		switch {
		case a == "-o":
			name = "output"
		case strings.HasPrefix(a, "--") && len(a) > 2:
			name, val, hasVal = strings.Cut(a[2:], "=")
		default:
			return nil, false
		}
		kind, known := frontFlag(name)
		if _, seen := vals[name]; !known || seen {
			return nil, false
		}
		switch {
		case kind == switchFlag && hasVal:
			return nil, false
		case kind == switchFlag:
			val = "true"
		case !hasVal:
			if i+1 >= len(args) {
				return nil, false
			}
			i++
			val = args[i]
		}
		// A value that is not UTF-8 would reach serve changed (JSON carries U+FFFD for it):
		// serve would judge another name or path than this command line's.
		if !utf8.ValidString(val) {
			return nil, false
		}
		vals[name] = val
	}
	r := &runFlags{
		subagent: vals["subagent"], target: vals["target"], input: vals["input"], callback: vals["callback"],
		detach: vals["detach"] != "", progress: vals["progress"] != "", learn: vals["learn"] != "",
	}
	if r.subagent == "" {
		return nil, false
	}
	switch vals["output"] {
	case "", "table":
	case "json":
		r.output = "json"
	default:
		return nil, false
	}
	// An input serve's exact decoder refuses (invalid UTF-8, a duplicated key) would come
	// back 400: the whole program reads it then, and may as well at once.
	if r.input != "" && (strings.HasPrefix(r.input, "@") || !json.Valid([]byte(r.input)) || strictjson.Check([]byte(r.input)) != nil) {
		return nil, false
	}
	if t, ok := vals["timeout"]; ok {
		d, err := time.ParseDuration(t)
		if err != nil || d < 0 {
			return nil, false
		}
		r.timeout = d
	}
	if e, ok := vals["env"]; ok {
		// pflag reads a slice flag's value as one CSV record: without quotes or line breaks
		// that is a split at commas.
		if strings.ContainsAny(e, "\"\r\n") {
			return nil, false
		}
		r.envs = splitList(strings.Split(e, ","))
	}
	repo, ws := vals["repo"], vals["workspace"]
	if repo != "" && ws != "" {
		return nil, false
	}
	if repo != "" {
		// The whole program hands off only an absolute repository: serve resolves paths
		// from its own directory.
		if r.repo, r.rev = splitRepo(repo); !filepath.IsAbs(r.repo) {
			return nil, false
		}
	}
	if ws != "" {
		r.workspace, r.rev = splitWorkspace(ws)
	}
	return r, true
}

// splitList, splitWorkspace and splitRepo are internal/cli's, as the whole program reads the
// same flags (frontflags_test.go holds them to it).
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func splitWorkspace(s string) (name, rev string) {
	i := strings.LastIndex(s, "@")
	if i < 0 || strings.HasPrefix(s[i+1:], "sha256:") {
		return s, ""
	}
	return s[:i], s[i+1:]
}

func splitRepo(s string) (string, string) {
	i := strings.LastIndex(s, "@")
	if i <= 0 {
		return s, ""
	}
	if fi, err := os.Stat(s); err == nil && fi.IsDir() {
		return s, ""
	}
	return s[:i], s[i+1:]
}
