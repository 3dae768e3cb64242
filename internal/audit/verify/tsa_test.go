package verify_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
)

func TestCheckTimestamp(t *testing.T) {
	tsa, other := audittest.NewTSA(t), audittest.NewTSA(t)
	noEKU, nonCritical := audittest.NewTSAWithoutEKU(t), audittest.NewTSANonCriticalEKU(t)
	data := []byte("a checkpoint\n")
	token := tsa.Stamp(t, data)
	at, err := verify.CheckTimestamp(token, data, tsa.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(at); d < 0 || d > time.Minute {
		t.Errorf("token time %v, want about now", at)
	}
	flipped := append([]byte(nil), token...)
	flipped[len(flipped)-20] ^= 1
	tests := []struct {
		name  string
		token []byte
		data  []byte
		tsa   *audittest.TSA
		want  string
	}{
		{"other data", token, []byte("another checkpoint\n"), tsa, "message imprint"},
		{"untrusted root", token, data, other, "unknown authority"},
		{"no time-stamping usage", noEKU.Stamp(t, data), data, noEKU, "not exactly id-kp-timeStamping"},
		{"non-critical time-stamping usage", nonCritical.Stamp(t, data), data, nonCritical, "not critical"},
		{"flipped byte", flipped, data, tsa, "check timestamp"},
		{"garbage", []byte("not a token"), data, tsa, "parse token"},
		{"empty", nil, data, tsa, "parse token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verify.CheckTimestamp(tt.token, tt.data, tt.tsa.Pool)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := verify.CheckTimestamp(token, data, nil); !errors.Is(err, verify.ErrNoTSARoot) {
		t.Errorf("without roots: got %v, want ErrNoTSARoot", err)
	}
}
