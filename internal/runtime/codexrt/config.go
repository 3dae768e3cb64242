package codexrt

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// EnvKey is the variable codex once read its provider's bearer token from. codex no longer
// gets it (codex passes its environment to every process it starts, its
// commands' shells and its own helpers, all readable by the agent's tools); ConfigTOML puts
// the token in the config, which Run rewrites without it once codex has read it. The name
// stays excluded from the commands' environment all the same.
const EnvKey = "AGORA_CODEX_TOKEN"

// providerName is the one model provider the generated config defines.
const providerName = "agora"

// ConfigTOML returns the config.toml codex runs with (see the package doc for why each
// setting). baseURL is where codex POSTs {baseURL}/responses, with token as its bearer token
// ("": none). It refuses values TOML or codex could misread rather than escape them into
// something else.
func ConfigTOML(model, baseURL, systemPrompt, token string) ([]byte, error) {
	if model == "" {
		return nil, fmt.Errorf("codex runtime: the subagent names no model")
	}
	if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
		return nil, fmt.Errorf("codex runtime: base URL %q is not http(s)", baseURL)
	}
	for name, v := range map[string]string{"model": model, "base URL": baseURL, "system prompt": systemPrompt, "token": token} {
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("codex runtime: the %s is not valid UTF-8 text", name)
		}
	}
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	line("model", tomlString(model))
	line("model_provider", tomlString(providerName))
	line("approval_policy", tomlString("never"))
	line("sandbox_mode", tomlString("danger-full-access"))
	line("check_for_update_on_startup", "false")
	line("web_search", tomlString("disabled"))
	if systemPrompt != "" {
		line("developer_instructions", tomlString(systemPrompt))
	}
	b.WriteString("\n[analytics]\nenabled = false\n")
	b.WriteString("\n[feedback]\nenabled = false\n")
	b.WriteString("\n[features]\nplugins = false\nremote_plugin = false\napps = false\nunbounded_connection_retries = false\n")
	// The commands codex runs are the agent's: they do not get the relay token codex sends.
	// Everything else of the environment passes, as before.
	b.WriteString("\n[shell_environment_policy]\n")
	line("inherit", tomlString("all"))
	line("exclude", "["+tomlString(EnvKey)+"]")
	b.WriteString("\n[model_providers." + providerName + "]\n")
	line("name", tomlString(providerName))
	line("base_url", tomlString(baseURL))
	if token != "" {
		line("experimental_bearer_token", tomlString(token))
	}
	line("wire_api", tomlString("responses"))
	line("request_max_retries", "0")
	line("stream_max_retries", "0")
	return []byte(b.String()), nil
}

// tomlString quotes s as a TOML basic string: quotes, backslashes and every control
// character escaped, so no value can end the string or start a new key.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
