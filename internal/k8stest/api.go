package k8stest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// StatusError is a refusal from the apiserver: the HTTP code and the Status object it sent.
type StatusError struct {
	Method, Path string
	Code         int
	Reason       string // "Forbidden", "AlreadyExists", "NotFound", ...
	Message      string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// IsNotFound reports whether err is the apiserver's 404.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// newHTTPClient is an admin client of the apiserver: it trusts only the cluster's CA and
// presents the admin certificate.
func newHTTPClient(caPEM []byte, id *identity) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the cluster CA certificate does not parse")
	}
	cert, err := tls.X509KeyPair(id.certPEM, id.keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load the admin certificate: %w", err)
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 16,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// HTTPClient returns an HTTP client that speaks to Server as the cluster admin.
func (c *Cluster) HTTPClient() *http.Client { return c.client }

// Do sends a request to the apiserver as the admin: in, when not nil, is sent as JSON; a 2xx
// answer is decoded into out when out is not nil (or stored as is when out is a *[]byte);
// anything else is a *StatusError. path is
// the API path ("/api/v1/namespaces/agents/pods"), with any query.
func (c *Cluster) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var st struct{ Reason, Message string }
		if json.Unmarshal(b, &st) != nil || st.Message == "" {
			st.Message = string(b)
		}
		return &StatusError{Method: method, Path: path, Code: resp.StatusCode, Reason: st.Reason, Message: st.Message}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok { // a pod's log, say
		*raw = b
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Wait polls GET path every 50 ms until done reports true for the decoded object, ctx ends, or
// done returns an error (which Wait returns). A 404 counts as "not yet".
func (c *Cluster) Wait(ctx context.Context, path string, done func(obj map[string]any) (bool, error)) error {
	for {
		var obj map[string]any
		err := c.Do(ctx, http.MethodGet, path, nil, &obj)
		switch {
		case err == nil:
			ok, err := done(obj)
			if err != nil || ok {
				return err
			}
		case !IsNotFound(err) && ctx.Err() == nil:
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting on %s: %w", path, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
