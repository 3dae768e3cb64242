package container

import (
	"errors"
	"fmt"
	"strings"
)

// taskIDPrefix starts every task id this provider hands out.
const taskIDPrefix = "docker:"

// ErrBadTaskID means a task id is not one this provider produced.
var ErrBadTaskID = errors.New("malformed docker task id")

// parseTaskID returns the container id of "docker:<64 lowercase hex>", the one form
// [handle.TaskID] writes. A prefix or name is refused: the engine would resolve it to
// whichever container matches.
func parseTaskID(s string) (string, error) {
	id, ok := strings.CutPrefix(s, taskIDPrefix)
	if !ok || len(id) != 64 || !isLowerHex(id) {
		return "", fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
	}
	return id, nil
}
