package dispatch

import (
	"crypto/hmac"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// Helpers only the tests call: the product reaches what they wrap by another way, so they
// live with the tests rather than in the package.

func newStage(stateDir, id string, l stageLimits) (*stage, error) {
	return newStageFrom(stateDir, id, l, nil)
}

// Verify checks a delivery's signature in constant time.
func Verify(key []byte, id, timestamp string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(key, id, timestamp, body)), []byte(signature))
}

// DispatchEnd reports whether kind records a dispatch's terminal state.
func DispatchEnd(kind string) bool {
	switch kind {
	case entry.DispatchFinished, entry.DispatchFailed, entry.DispatchCancelled, entry.DispatchNeedsInput:
		return true
	}
	return false
}
