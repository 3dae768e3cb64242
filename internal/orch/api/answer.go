package api

import "strings"

// AnswerCommand is the command a person runs on the host to answer task taskID of run runID,
// as hints quote it for pasting into a shell: each id is one shell word. The engine's own task
// ids hold '[' and ']' (a fan-out item, fan[KEY]), a glob that a shell would expand to a file's
// name, such as another task's id; such an id is single-quoted.
func AnswerCommand(runID, taskID string) string {
	return "agora orch answer " + shellWord(runID) + " " + shellWord(taskID) + " --answer TEXT"
}

// shellWord is s as one POSIX shell word: as it is when every byte is one no shell treats
// specially, else in single quotes (a single quote inside closes them, is escaped, and reopens them).
func shellWord(s string) string {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_-.,:/@%+=", c) >= 0
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
