package orch_test

import (
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// TestMain fails the package when a goroutine a test started (an engine's loop, a
// dispatcher's attempt) outlives the tests, and when any test's engine wrote the extension
// links all plain tasks share (extend.go, noExt) or the rare fields they share (model.go,
// noRare) or the rare spec fields they share (plan.NoRare) instead of a task's own.
func TestMain(m *testing.M) {
	code := m.Run()
	if orch.NoExtWritten() {
		fmt.Fprintln(os.Stderr, "FAIL: the extension links plain tasks share (noExt) were written: a write through a task's ext fields must go through own()")
		code = 1
	}
	if orch.NoRareWritten() {
		fmt.Fprintln(os.Stderr, "FAIL: the rare fields plain tasks share (noRare) were written: a write of a task's reason, detail, retry time, question, answer or parent must go through its set method")
		code = 1
	}
	if !reflect.ValueOf(*plan.NoRare).IsZero() {
		fmt.Fprintln(os.Stderr, "FAIL: the rare fields plain specs share (plan.NoRare) were written: a spec that needs its own takes plan.WithRare")
		code = 1
	}
	os.Exit(agoratest.NoLeaks(code))
}
