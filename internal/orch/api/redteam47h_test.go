package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// redBase is a shell's environment a taker was started in.
var redBase = []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "TERM=xterm", "AGORA_HOME=/h",
	"AWS_ACCESS_KEY_ID=AKIARESIDENT", "AWS_SECRET_ACCESS_KEY=resident-secret"}

// TestRedTeam47H_S3CredentialsChangeADispatch: with blobs.s3 and no credentials_file, the
// process that runs a dispatch writes its patch, output, log and transcript to the bucket with
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from its own environment
// (home.S3Client, s3.LoadCredentials). A CLI whose credentials are another principal's, or
// that has none (its cold dispatch fails to open the home), must not have its dispatch run
// with the resident's: each of them changes the digest and is named.
func TestRedTeam47H_S3CredentialsChangeADispatch(t *testing.T) {
	want := EnvDigest(redBase)
	for _, env := range [][]string{
		with(redBase, "AWS_ACCESS_KEY_ID=AKIAREADONLY"),
		with(redBase, "AWS_SECRET_ACCESS_KEY=other"),
		with(redBase, "AWS_SESSION_TOKEN=tok"),
		slices.DeleteFunc(slices.Clone(redBase), func(kv string) bool { return strings.HasPrefix(kv, "AWS_") }),
	} {
		if EnvDigest(env) == want {
			t.Errorf("%v: the digest is the resident's, so its dispatch's blobs go to the bucket with the resident's credentials",
				EnvDiff(EnvSums(env), EnvSums(redBase), func(string) bool { return true }))
		}
		if got := EnvDiff(EnvSums(env), EnvSums(redBase), DispatchEnv); len(got) == 0 || !strings.HasPrefix(got[0], "AWS_") {
			t.Errorf("the decline names %v, want the AWS_ variable", got)
		}
	}
	// AWS_PROFILE and the like are read by no code of agora's (a kubeconfig's plugin that may
	// read them keeps the whole-environment rule): a script's own profile does not matter.
	if EnvDigest(with(redBase, "AWS_PROFILE=dev", "AWS_REGION=eu-west-1")) != want {
		t.Error("AWS_PROFILE or AWS_REGION changes the digest: agora reads neither")
	}
}

// TestRedTeam47H_NonUTF8NamesKeepTheHandoff: a variable's name may be any bytes but '=' and
// NUL. The request carries the sums as JSON, where invalid UTF-8 becomes U+FFFD, so two names
// that differ only in invalid bytes, or one invalid name beside one starting with a 4-byte
// character, would reach the taker repeated or out of order: it would refuse the request as
// malformed (400, which the CLI runs cold without a word) though the digests agree. The sums
// only explain a decline; they must never lose a hand-off the digest allows.
func TestRedTeam47H_NonUTF8NamesKeepTheHandoff(t *testing.T) {
	for name, env := range map[string][]string{
		"repeated":     append(slices.Clone(redBase), "X\xff=1", "X\xfe=2"),
		"out of order": append(slices.Clone(redBase), "\xff=1", "\U0001F600=2"),
		"both":         append(slices.Clone(redBase), "A\x80=1", "A\xc0=2", "A\U0001F600=3", "A\ufffd=4"),
	} {
		r := HandoffRequest{Home: "/h", Exe: "/e", Env: EnvDigest(env), EnvAll: ResidentEnvDigest(env), Subagent: "s", EnvSums: EnvSums(env)}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeHandoffRequest(b)
		if err != nil {
			t.Errorf("%s: the taker refuses the request of a CLI whose digest is its own: %v", name, err)
			continue
		}
		if d := EnvDiff(got.EnvSums, EnvSums(env), func(string) bool { return true }); len(d) != 0 {
			t.Errorf("%s: the same environment, sent and read back, differs in %q", name, d)
		}
	}
}

// TestRedTeam47H_SumsAreCheckedNotTrusted: a request's list of sums is read exactly: past
// MaxEnvSums, a sum carrying more than 8 bytes (a value's prefix smuggled in), a name twice
// (to make one variable look equal and differ at once) and a sum with a second '=' are refused;
// MaxEnvSums entries are read. What the sums say never sets the digest the taker compares.
func TestRedTeam47H_SumsAreCheckedNotTrusted(t *testing.T) {
	req := func(sums []string) []byte {
		b, err := json.Marshal(HandoffRequest{Home: "/h", Exe: "/e", Env: "e", Subagent: "s", EnvSums: sums})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	full := make([]string, MaxEnvSums)
	for i := range full {
		full[i] = fmt.Sprintf("V%05d=0123456789abcdef", i)
	}
	if _, err := DecodeHandoffRequest(req(full)); err != nil {
		t.Errorf("%d sums refused: %v", MaxEnvSums, err)
	}
	for name, sums := range map[string][]string{
		"past the cap":  append(slices.Clone(full), "W=0123456789abcdef"),
		"long sum":      {"PATH=0123456789abcdef0123456789abcdef"},
		"value in sum":  {"PATH=/usr/bin:/bin"},
		"second equals": {"PATH=0123=56789abcdef"},
		"name twice":    {"PATH=0123456789abcdef", "PATH=fedcba9876543210"},
		"empty name":    {"=0123456789abcdef"},
	} {
		if _, err := DecodeHandoffRequest(req(sums)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Sums claiming the taker's environment do not move the digest: the request's env does.
	env := with(redBase, "PATH=/evil")
	if EnvDigest(env) == EnvDigest(redBase) {
		t.Fatal("another PATH has the digest of the base")
	}
}

// TestRedTeam47H_CaseAndFamilies: Go reads the proxies in upper and lower case and nothing
// else (Https_Proxy is read by no one), the dynamic linker every LD_* variable (LD_AUDIT
// loads code as LD_PRELOAD does), and a family is compared whole however a member is spelt
// after its prefix; a name that only looks like a family's (DOCKERHOST, LD, ld_preload) is not
// one, since neither Go nor ld.so reads it.
func TestRedTeam47H_CaseAndFamilies(t *testing.T) {
	want := EnvDigest(redBase)
	for _, kv := range []string{"HTTPS_PROXY=http://a", "https_proxy=http://a", "HTTP_PROXY=http://a", "http_proxy=http://a",
		"NO_PROXY=x", "no_proxy=x", "LD_AUDIT=/x.so", "LD_BIND_NOW=1", "LD_DEBUG=all", "AGORA_=1", "DOCKER_=1",
		"AGORA_\x1b[2J=1", "LD_\n=1", "KUBERNETES_PORT=tcp://x", "OTEL_=1", "CONTAINERS_STORAGE_CONF=/x"} {
		if EnvDigest(with(redBase, kv)) == want {
			t.Errorf("%q does not change the digest", kv)
		}
	}
	for _, kv := range []string{"Https_Proxy=http://a", "DOCKERHOST=x", "LD=1", "ld_preload=/x.so", "Path=/x", "agora_worker_binary=/w"} {
		if EnvDigest(with(redBase, kv)) != want {
			t.Errorf("%q changes the digest: nothing reads it", kv)
		}
	}
}

// TestRedTeam47H_SumsNeverOverflowTheRequest: a request is capped at MaxHandoffRequest, room
// for a 1 MiB --input and the flags. A variable's name may be up to 128 KiB (the kernel's
// MAX_ARG_STRLEN) and an environment up to ARG_MAX, so the sums of a few long-named variables
// (a CI job's user-set ones) would push a request with a full --input past the cap: the
// taker answers 413, which the CLI runs cold without a word, though the digests agree.
func TestRedTeam47H_SumsNeverOverflowTheRequest(t *testing.T) {
	env := slices.Clone(redBase)
	for i := range 12 {
		env = append(env, fmt.Sprintf("N%d%s=1", i, strings.Repeat("x", 127<<10)))
	}
	// Names JSON writes six bytes for each of theirs.
	for i := range 2 {
		env = append(env, fmt.Sprintf("C%d%s=1", i, strings.Repeat("\x01<", 50<<10)))
	}
	input := `"` + strings.Repeat("a", 1<<20-2) + `"`
	r := HandoffRequest{Home: "/h", Exe: "/e", Env: EnvDigest(env), EnvAll: ResidentEnvDigest(env), Subagent: "s",
		EnvSums: EnvSums(env), Input: json.RawMessage(input)}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeHandoffRequest(b); err != nil {
		t.Errorf("a request of %d bytes (%d sums) refused: %v", len(b), len(r.EnvSums), err)
	}
}

// TestRedTeam47H_ClientGoSwitches: a kubernetes target's client (client-go, apimachinery)
// reads switches of its own that are not KUBERNETES_*: its feature gates (KUBE_FEATURE_*: the
// wire encoding, CBOR, and how lists are watched), its retry backoff (KUBE_CLIENT_BACKOFF_*),
// its debug detectors (KUBE_CACHE_MUTATION_DETECTOR panics on a mutation) and HTTP/2 on the
// apiserver connection (DISABLE_HTTP2, HTTP2_*_SECONDS). A taker built its client from its
// own; a CLI whose are not the taker's would have its dispatch talk to the cluster otherwise.
func TestRedTeam47H_ClientGoSwitches(t *testing.T) {
	want := EnvDigest(redBase)
	for _, kv := range []string{"KUBE_FEATURE_ClientsPreferCBOR=true", "KUBE_FEATURE_WatchListClient=false",
		"KUBE_CLIENT_BACKOFF_BASE=60", "KUBE_CLIENT_BACKOFF_DURATION=600", "KUBE_CACHE_MUTATION_DETECTOR=true",
		"DISABLE_HTTP2=1", "HTTP2_READ_IDLE_TIMEOUT_SECONDS=1", "HTTP2_PING_TIMEOUT_SECONDS=1"} {
		env := with(redBase, kv)
		if EnvDigest(env) == want {
			t.Errorf("%s does not change the digest", kv)
		}
		k, _, _ := strings.Cut(kv, "=")
		if got := EnvDiff(EnvSums(env), EnvSums(redBase), DispatchEnv); !slices.Equal(got, []string{k}) {
			t.Errorf("with %s the decline names %v", kv, got)
		}
	}
}
