package shellwords

import "strings"

// Quote returns w as one shell word that [Split] (and sh, bash, zsh) read back as exactly w:
// w itself when every byte is one no shell treats specially (not '=' or '%': zsh expands a
// word that starts with '=' to a command's path), else w in single quotes (a single
// quote inside closes them, is escaped, and reopens them). Hints that quote a command for a
// person to paste (agora orch answer RUN TASK, agora orch patches ... --skip TASK) build each
// word with it: an id or a branch name may hold a glob ('[', as a fan-out item's id does) or
// an operator (';', '$', as a branch name may).
func Quote(w string) string {
	plain := w != ""
	for i := 0; i < len(w) && plain; i++ {
		c := w[i]
		plain = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_-.,:/@+", c) >= 0
	}
	if plain {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
