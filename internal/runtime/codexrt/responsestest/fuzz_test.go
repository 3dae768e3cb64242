package responsestest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzCheck: any body gets an answer (a refusal or a turn), never a panic.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"model":"m","input":"hi"}`, `{"model":"m","input":[{"type":"function_call","call_id":"a"},{"type":"function_call_output","call_id":"a","output":"x"}]}`, `{"model":"m","input":[{"type":"function_call_output","call_id":"b","output":{"x":1}}]}`, `{`, `{"model":1}`} {
		f.Add(s)
	}
	s := &Server{}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req Request
		status, msg, _ := s.check(r, []byte(body), &req)
		if status != 0 && msg == "" {
			t.Errorf("refusal %d without a message", status)
		}
		if status == 0 && req.Model == "" {
			t.Error("accepted a request without a model")
		}
	})
}
