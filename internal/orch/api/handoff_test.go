package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

const okHandoff = `{"home":"/h","exe":"/bin/agora","env":"e","subagent":"noop","budget":{}}`

// TestDecodeHandoffRequest_Exact: the request is read exactly: an actor (which serve takes
// from the peer's credentials, never the client), a case-folded or duplicated key, a relative
// repository, a malformed input and an oversized body are refused with a clear error.
func TestDecodeHandoffRequest_Exact(t *testing.T) {
	if _, err := DecodeHandoffRequest([]byte(okHandoff)); err != nil {
		t.Fatalf("a good request: %v", err)
	}
	for name, c := range map[string]struct{ body, want string }{
		"forged actor":   {`{"home":"/h","exe":"/e","env":"e","subagent":"s","actor":"root"}`, "actor"},
		"case folded":    {`{"home":"/h","exe":"/e","env":"e","Subagent":"s"}`, "Subagent"},
		"duplicate key":  {`{"home":"/h","exe":"/e","env":"e","subagent":"s","subagent":"t"}`, "subagent"},
		"no subagent":    {`{"home":"/h","exe":"/e","env":"e"}`, "subagent is required"},
		"no home":        {`{"exe":"/e","env":"e","subagent":"s"}`, "home, exe and env"},
		"no env":         {`{"home":"/h","exe":"/e","subagent":"s"}`, "home, exe and env"},
		"relative repo":  {`{"home":"/h","exe":"/e","env":"e","subagent":"s","repo":"."}`, "not absolute"},
		"bad input":      {`{"home":"/h","exe":"/e","env":"e","subagent":"s","input":{"a":1,"A":2}}`, "input"},
		"grants a list":  {`{"home":"/h","exe":"/e","env":"e","subagent":"s","grants":[]}`, "grants"},
		"negative":       {`{"home":"/h","exe":"/e","env":"e","subagent":"s","timeout_ns":-1}`, "negative"},
		"bad output":     {`{"home":"/h","exe":"/e","env":"e","subagent":"s","output":"yaml"}`, "output"},
		"two values":     {okHandoff + okHandoff, ""},
		"huge":           {`{"home":"/h","exe":"/e","env":"e","subagent":"s","input":"` + strings.Repeat("a", MaxHandoffRequest) + `"}`, "limit"},
		"not an object":  {`[]`, ""},
		"learn a string": {`{"home":"/h","exe":"/e","env":"e","subagent":"s","learn":"yes"}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeHandoffRequest([]byte(c.body))
			if err == nil {
				t.Fatalf("accepted %.80s", c.body)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not name %q", err, c.want)
			}
		})
	}
}

// TestDecodeHandoffFrame_OneField: a frame carries exactly one thing.
func TestDecodeHandoffFrame_OneField(t *testing.T) {
	for _, ok := range []string{`{"out":"x\n"}`, `{"end":{"exit":3}}`, `{"handle":"ab"}`} {
		if _, err := DecodeHandoffFrame([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{`{}`, `{"out":"a","err":"b"}`, `{"end":{"exit":256}}`, `{"end":{"exit":-1}}`, `{"Out":"a"}`, `{"out":"a","more":1}`} {
		if _, err := DecodeHandoffFrame([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// FuzzDecodeHandoffRequest: no input panics the hand-off parser, and what it accepts is a
// request serve can act on (home, exe and subagent set, an absolute repository or none).
func FuzzDecodeHandoffRequest(f *testing.F) {
	f.Add([]byte(okHandoff))
	f.Add([]byte(`{"home":"/h","exe":"/e","env":"e","subagent":"s","repo":"/r","input":{"a":[1,2]},"grants":{"tools":[]},"learn":true,"detach":true,"output":"json","timeout_ns":5}`))
	f.Add([]byte(`{"home":"/h","exe":"/e","env":"e","subagent":"s","actor":"root"}`))
	f.Add([]byte(`{"home":"/h","exe":"/e","env":"e","subagent":"s","verify":{"command":"true"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHandoffRequest(b)
		if err != nil {
			return
		}
		if r.Home == "" || r.Exe == "" || r.Env == "" || r.Subagent == "" || r.TimeoutNS < 0 || (r.Repo != "" && r.Repo[0] != '/') {
			t.Fatalf("accepted an unusable request: %+v", r)
		}
	})
}

// FuzzDecodeHandoffFrame: no input panics the CLI's frame reader, and an accepted frame has
// one field set.
func FuzzDecodeHandoffFrame(f *testing.F) {
	f.Add([]byte(`{"err":"agora: x accepted\n"}`))
	f.Add([]byte(`{"end":{"exit":130,"error":"cancelled","interrupted":true}}`))
	f.Add([]byte(`{"id":"01M86S31ZMCFQDHC9NHHG62VFE"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeHandoffFrame(b)
		if err != nil {
			return
		}
		if fr.End != nil && (fr.End.Exit < 0 || fr.End.Exit > 255) {
			t.Fatalf("exit %d accepted", fr.End.Exit)
		}
	})
}

// TestEnvDigest_WhatADispatchReads: the digest changes with PATH, DOCKER_HOST,
// AGORA_WORKER_BINARY and OTEL_*, not with the order of the environment or other variables.
func TestEnvDigest_WhatADispatchReads(t *testing.T) {
	base := []string{"PATH=/usr/bin", "HOME=/root", "OTEL_SERVICE_NAME=a"}
	d := EnvDigest(base)
	if EnvDigest([]string{"OTEL_SERVICE_NAME=a", "TERM=x", "PATH=/usr/bin"}) != d {
		t.Error("order or an unread variable changed the digest")
	}
	for _, extra := range []string{"PATH=/opt/bin", "DOCKER_HOST=tcp://x", "AGORA_WORKER_BINARY=/w", "OTEL_EXPORTER_OTLP_ENDPOINT=http://x"} {
		if EnvDigest(append(slices.Clone(base)[:0:0], append([]string{extra}, base[1:]...)...)) == d {
			t.Errorf("%s did not change the digest", extra)
		}
	}
}

// shellEnv is the environment of an interactive shell on a desktop: what a resident
// dispatcher started by its first `agora dispatch run` holds.
var shellEnv = []string{
	"PATH=/home/u/.local/bin:/usr/local/bin:/usr/bin:/bin", "HOME=/home/u", "USER=u", "LOGNAME=u", "SHELL=/bin/bash",
	"LANG=en_US.UTF-8", "TERM=xterm-256color", "PWD=/home/u/src", "OLDPWD=/home/u", "SHLVL=1", "_=/usr/bin/agora",
	"XDG_RUNTIME_DIR=/run/user/1000", "XDG_SESSION_ID=3", "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
	"SSH_AUTH_SOCK=/run/user/1000/keyring/ssh", "AGORA_HOME=/home/u/.agora", "DOCKER_HOST=unix:///run/user/1000/podman/podman.sock",
	"HTTPS_PROXY=http://proxy:3128", "ANTHROPIC_API_KEY=sk-ant-shell",
}

// with is env less the variables named in kvs, plus kvs.
func with(env []string, kvs ...string) []string {
	out := slices.Clone(env)
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(e string) bool { return strings.HasPrefix(e, k+"=") })
	}
	return append(out, kvs...)
}

// only is the variables of env named in names.
func only(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return !slices.Contains(names, k)
	})
}

// TestDispatchEnv_Callers: a script, a cron job and an editor's terminal differ from the
// shell a resident was started in only in variables no dispatch reads, and get its digest;
// a variable that changes a dispatch (where tools are found, the engine, a proxy, the CAs,
// the Go runtime, the linker, any AGORA_* but the CLI's own switches, known or not) changes
// it, and EnvDiff names exactly that variable.
func TestDispatchEnv_Callers(t *testing.T) {
	want := EnvDigest(shellEnv)
	for name, env := range map[string][]string{
		"script": with(shellEnv, "_=/home/u/bin/nightly.sh", "SHLVL=2", "PWD=/srv/job", "NIGHTLY_RUN=1", "BUILD_ID=42"),
		// cron: env -i and a minimal PATH, HOME, SHELL, LOGNAME; the variables a dispatch
		// reads as the shell had them (else cron's PATH is another PATH: declined, said).
		"cron": append(only(shellEnv, "PATH", "HOME", "AGORA_HOME", "DOCKER_HOST", "HTTPS_PROXY"), "SHELL=/bin/sh", "LOGNAME=u"),
		"editor": with(shellEnv, "TERM_PROGRAM=vscode", "TERM_PROGRAM_VERSION=1.95.3", "VSCODE_IPC_HOOK_CLI=/run/user/1000/vscode-ipc.sock",
			"VSCODE_GIT_ASKPASS_MAIN=/usr/share/code/askpass.js", "EDITOR=code --wait", "VISUAL=vim", "COLORTERM=truecolor",
			"LS_COLORS=rs=0:di=01;34", "SSH_CONNECTION=10.0.0.2 5022 10.0.0.1 22", "SSH_TTY=/dev/pts/3", "GIT_ASKPASS=/x",
			"LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "NO_COLOR=1", "ANTHROPIC_API_KEY=sk-ant-editor"),
		"switches":             with(shellEnv, "AGORA_NO_HANDOFF=", "AGORA_NO_RESIDENT=1", "AGORA_HANDOFF_LOST=x", "AGORA_HTTP_TOKEN=t", "AGORA_OIDC_CLIENT_SECRET=s"),
		"home named elsewhere": with(shellEnv, "AGORA_HOME=./.agora", "HOME=/home/u2", "XDG_DATA_HOME=/d"),
	} {
		if got := EnvDigest(env); got != want {
			t.Errorf("%s: the digest changed (%v differ): a resident of the shell would decline it", name, EnvDiff(EnvSums(env), EnvSums(shellEnv), DispatchEnv))
		}
	}
	for _, kv := range []string{
		"PATH=/usr/bin:/bin", "DOCKER_HOST=tcp://10.0.0.9:2375", "DOCKER_CONFIG=/x", "DOCKER_TLS_VERIFY=1",
		"HTTPS_PROXY=http://other:3128", "https_proxy=http://p", "HTTP_PROXY=http://p", "NO_PROXY=*", "no_proxy=x", "REQUEST_METHOD=GET",
		"SSL_CERT_FILE=/ca.pem", "SSL_CERT_DIR=/ca", "KUBECONFIG=/k", "KUBERNETES_SERVICE_HOST=10.0.0.1",
		"AGORA_WORKER_BINARY=/w", "AGORA_TOOLCHAIN_IMAGE=x", "AGORA_SOMETHING_NEW=1", "AGORA_TEST_X=1",
		"OTEL_SERVICE_NAME=x", "TMPDIR=/scratch", "GODEBUG=x509sha1=1", "GOFIPS140=latest", "TZ=UTC", "ZONEINFO=/z",
		"LD_PRELOAD=/x.so", "LD_LIBRARY_PATH=/l", "CONTAINER_HOST=unix:///x", "CONTAINERS_CONF=/c",
	} {
		env := with(shellEnv, kv)
		if EnvDigest(env) == want {
			t.Errorf("with %s the digest is the shell's: a resident of the shell would run the dispatch with its own", kv)
		}
		k, _, _ := strings.Cut(kv, "=")
		if got := EnvDiff(EnvSums(env), EnvSums(shellEnv), DispatchEnv); !slices.Equal(got, []string{k}) {
			t.Errorf("with %s EnvDiff names %v, want [%s]", kv, got, k)
		}
	}
}

// TestEnvSums_Form: the sums hold no value, are what DecodeHandoffRequest accepts whatever
// the names (sorted by name, a name twice kept once; none past MaxEnvSums), and a malformed
// list is refused.
func TestEnvSums_Form(t *testing.T) {
	const secret = "sk-ant-0123456789abcdef"
	env := []string{"B=1", "A-B=2", "A=3", "ANTHROPIC_API_KEY=" + secret, "A=4", "PWD=/x", "_=/y", "AGORA_NO_HANDOFF=1"}
	sums := EnvSums(env)
	if err := checkEnvSums(sums); err != nil {
		t.Fatalf("EnvSums %v: %v", sums, err)
	}
	var names []string
	for _, kv := range sums {
		if strings.Contains(kv, secret) || strings.Contains(kv, "sk-ant") {
			t.Errorf("a sum holds the value: %s", kv)
		}
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	if want := []string{"A", "A-B", "ANTHROPIC_API_KEY", "B"}; !slices.Equal(names, want) {
		t.Errorf("names %v, want %v (PWD, _ and the CLI's switches left out)", names, want)
	}
	if got := EnvDiff(sums, EnvSums(with(env, "ANTHROPIC_API_KEY=other")), func(string) bool { return true }); !slices.Equal(got, []string{"ANTHROPIC_API_KEY"}) {
		t.Errorf("EnvDiff %v, want [ANTHROPIC_API_KEY]", got)
	}
	for name, list := range map[string]string{
		"no sum":    `["A"]`,
		"short":     `["A=00"]`,
		"upper":     `["A=00000000000000AA"]`,
		"no name":   `["=0000000000000000"]`,
		"repeated":  `["A=0000000000000000","A=0000000000000001"]`,
		"unsorted":  `["B=0000000000000000","A=0000000000000000"]`,
		"not a str": `[1]`,
	} {
		body := `{"home":"/h","exe":"/e","env":"e","subagent":"s","env_sums":` + list + `}`
		if _, err := DecodeHandoffRequest([]byte(body)); err == nil {
			t.Errorf("%s: accepted %s", name, list)
		}
	}
	huge := make([]string, MaxEnvSums+1)
	for i := range huge {
		huge[i] = fmt.Sprintf("V%d=1", i)
	}
	if got := EnvSums(huge); got != nil {
		t.Errorf("an environment of %d variables: %d sums, want none (a taker refuses more than %d)", len(huge), len(got), MaxEnvSums)
	}
	ok := `{"home":"/h","exe":"/e","env":"e","subagent":"s","env_sums":["A=0123456789abcdef","B=0000000000000000"]}`
	if _, err := DecodeHandoffRequest([]byte(ok)); err != nil {
		t.Errorf("a good list refused: %v", err)
	}
}
