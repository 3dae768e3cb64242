package codexrt

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
)

// TestRedTeam38_CommandsLackRelayToken: the relay token codex sends is codex's,
// not its commands'. The real Codex CLI gets it in config.toml only: a command's environment
// has every other variable of codex's (a marker passes) and no token, nor does any process
// codex starts (its helpers inherit its environment); and once codex's first request is
// answered (ForgetToken called, as the worker's relay does) the token is no longer in the
// config, nor any file under CODEX_HOME (codex's sessions, logs and state databases) a command
// can read, while codex keeps authenticating (the fake requires the token on
// every turn). Failed before: `env` printed AGORA_CODEX_TOKEN=<token> to the model.
func TestRedTeam38_CommandsLackRelayToken(t *testing.T) {
	codex := realCodex(t)
	const token = "agora-relay-rt38-0123456789abcdef"
	var mu sync.Mutex
	var forget func()
	turns := responsestest.Turns(
		responsestest.Exec(`env; cat "$CODEX_HOME/config.toml"; echo env-done`),
		// The token is split in the command's text (which codex keeps in its session file).
		responsestest.Exec(`echo second-turn; a=`+token[:16]+`; grep -rla "$a"`+token[16:]+` "$CODEX_HOME" 2>/dev/null | sed 's/^/holds-token:/'; echo grep-done`),
		responsestest.Say("done"))
	fake, err := responsestest.Start(token, func(r responsestest.Request) responsestest.Reply {
		mu.Lock()
		f := forget
		mu.Unlock()
		if f != nil {
			f()
		}
		return turns(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	_, err = Run(t.Context(), Config{Binary: codex, Model: "gpt-5.5", BaseURL: fake.URL, Token: token,
		Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "RT38_MARKER=passes"},
		Timeout: 2 * time.Minute, TempDir: t.TempDir(),
		ForgetToken: func(f func()) { mu.Lock(); forget = f; mu.Unlock() }}, "go")
	if err != nil {
		t.Fatalf("codex: %v", err)
	}
	var out string
	for _, r := range fake.Requests() {
		if r.Rejected != "" {
			t.Errorf("a request of codex's was refused: %s", r.Rejected)
		}
		for _, o := range r.Outputs {
			out += o
		}
	}
	if strings.Contains(out, "holds-token:") {
		t.Errorf("a file a command can read holds the token:\n%s", out)
	}
	if !strings.Contains(out, "env-done") || !strings.Contains(out, "RT38_MARKER=passes") || !strings.Contains(out, "grep-done") ||
		!strings.Contains(out, "base_url") {
		t.Fatalf("the commands' output did not come back whole:\n%s", out)
	}
	if strings.Contains(out, token) || strings.Contains(out, EnvKey+"=") {
		t.Errorf("codex's command sees the relay token:\n%s", out)
	}
}
