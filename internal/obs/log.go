package obs

import (
	"fmt"
	"io"
	"log/slog"
)

// Log formats of `agora orch serve --log-format`.
const (
	LogText = "text"
	LogJSON = "json"
)

// NewLogger returns serve's logger writing to w: key=value text for a person at a terminal
// (the default), or one JSON object per line for a log collector.
func NewLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "", LogText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want %s or %s", format, LogText, LogJSON)
}
