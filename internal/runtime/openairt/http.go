package openairt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	// maxResponseBytes caps a reply body, streamed or not.
	maxResponseBytes = 8 << 20
	// maxErrorBodyBytes caps how much of a non-2xx body is read for its message.
	maxErrorBodyBytes = 64 << 10
	// maxErrorMessage bounds the server's message quoted in an [HTTPError].
	maxErrorMessage = 512
	// maxRetries is how many times a 429 or 5xx reply is retried.
	maxRetries = 3
	// maxRetryWait bounds one wait before a retry, whatever Retry-After says.
	maxRetryWait = 60 * time.Second
	// baseBackoff is the first wait when the server gives no Retry-After; it doubles.
	baseBackoff = 500 * time.Millisecond
)

// ErrResponseTooLarge means a reply body (or one line of a stream) passed the size cap.
var ErrResponseTooLarge = errors.New("chat completion response too large")

// HTTPError reports a non-2xx reply from the model endpoint, after any retries.
type HTTPError struct {
	StatusCode int
	// Message is the server's error message, sanitized and bounded; empty when the body
	// had none.
	Message string
}

func (e *HTTPError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("model endpoint answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("model endpoint answered %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// retryable reports whether a status is worth another try.
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// backoff is the wait before retry n (0-based) when the server gives no hint.
type backoff func(n int) time.Duration

func defaultBackoff(n int) time.Duration {
	d := baseBackoff << n
	return d + rand.N(d/4+1) // jitter, so parallel workers do not retry in step
}

// client posts chat-completion requests.
type client struct {
	http    *http.Client
	url     string
	apiKey  string
	backoff backoff
	onRetry func(status int, wait time.Duration)
}

// complete posts req and decodes the reply, retrying 429 and 5xx replies up to maxRetries
// times. The reply is decoded as a stream when the server sends text/event-stream,
// whatever was asked.
func (c *client) complete(ctx context.Context, req *chatRequest) (completion, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return completion{}, fmt.Errorf("encode request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		comp, herr, err := c.post(ctx, body)
		if err != nil {
			return completion{}, err
		}
		if herr == nil {
			return comp, nil
		}
		if !retryable(herr.err.StatusCode) || attempt >= maxRetries {
			return completion{}, herr.err
		}
		wait := herr.retryAfter
		if wait < 0 {
			wait = c.backoff(attempt)
		}
		wait = min(wait, maxRetryWait)
		if c.onRetry != nil {
			c.onRetry(herr.err.StatusCode, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return completion{}, fmt.Errorf("wait to retry: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// statusError is a non-2xx reply with the server's hint for when to retry (-1: none).
type statusError struct {
	err        *HTTPError
	retryAfter time.Duration
}

func (c *client) post(ctx context.Context, body []byte) (completion, *statusError, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return completion{}, nil, fmt.Errorf("build request: %w", unwrapURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return completion{}, nil, fmt.Errorf("post request: %w", unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		return completion{}, &statusError{
			err:        &HTTPError{StatusCode: resp.StatusCode, Message: errorMessage(b)},
			retryAfter: retryAfter(resp.Header, time.Now()),
		}, nil
	}
	body2 := &cappedReader{r: resp.Body, n: maxResponseBytes}
	var comp completion
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		comp, err = decodeStream(body2, maxResponseBytes)
	} else {
		var b []byte
		b, err = io.ReadAll(body2)
		if err == nil {
			comp, err = decodeResponse(b)
		}
	}
	if err != nil {
		return completion{}, nil, fmt.Errorf("read reply: %w", err)
	}
	return comp, nil, nil
}

// unwrapURL drops the *url.Error wrapper so the endpoint URL is not repeated in every error.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// cappedReader fails with ErrResponseTooLarge after n bytes instead of truncating.
type cappedReader struct {
	r io.Reader
	n int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		// One byte more tells a body of exactly the cap from a longer one.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, ErrResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// errorMessage extracts the message of an error body: OpenAI's {"error":{"message"}}, a
// {"error":"..."} or vLLM's top-level {"message"}, or else a short plain-text body.
func errorMessage(b []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &v) == nil {
		var obj apiError
		var s string
		switch {
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			return bounded(obj.Message)
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return bounded(s)
		case v.Message != "":
			return bounded(v.Message)
		}
		return ""
	}
	t := strings.TrimSpace(string(b))
	if t == "" || !utf8.ValidString(t) || strings.HasPrefix(t, "<") {
		return "" // HTML error pages and binary say nothing useful
	}
	return bounded(t)
}

// bounded makes s safe to quote in an error: valid UTF-8, no control characters, at most
// maxErrorMessage bytes.
func bounded(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= maxErrorMessage {
		return s
	}
	cut := maxErrorMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// retryAfter reads the server's wait hint: retry-after-ms (OpenAI), then Retry-After in
// seconds or as an HTTP date. It returns -1 when there is none or it is unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(min(ms, float64(maxRetryWait/time.Millisecond)) * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return -1
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return -1
		}
		if s > int64(maxRetryWait/time.Second) {
			return maxRetryWait
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}
