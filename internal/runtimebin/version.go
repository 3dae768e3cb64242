package runtimebin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxVersion caps the version string kept; maxVersionOutput what is read of the output.
const (
	maxVersion       = 200
	maxVersionOutput = 64 << 10
)

// version runs `path --version` on the host with an empty environment but a throwaway HOME
// (Codex writes ~/.codex even for --version) and returns the first non-empty line.
func version(ctx context.Context, path string, timeout time.Duration) (string, error) {
	home, err := os.MkdirTemp("", "agora-runtimebin-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Dir = home
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=" + home, "CODEX_HOME=" + home, "CLAUDE_CONFIG_DIR=" + home,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "NO_COLOR=1",
	}
	out := &capBuffer{max: maxVersionOutput}
	cmd.Stdout = out
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "", fmt.Errorf("%s --version did not finish within %s", path, timeout)
	}
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !utf8.ValidString(line) {
			return "", fmt.Errorf("%s --version printed a line that is not UTF-8", path)
		}
		// It is printed on terminals and recorded: no escape sequence or control byte.
		line = strings.Map(func(r rune) rune {
			if !unicode.IsPrint(r) {
				return '?'
			}
			return r
		}, line)
		if len(line) > maxVersion {
			line = line[:maxVersion]
			for !utf8.ValidString(line) {
				line = line[:len(line)-1]
			}
		}
		return line, nil
	}
	return "", fmt.Errorf("%s --version printed nothing", path)
}

// capBuffer keeps the first max bytes written to it and drops the rest.
type capBuffer struct {
	bytes.Buffer
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
