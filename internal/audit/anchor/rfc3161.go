package anchor

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"time"

	"github.com/digitorus/timestamp"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/egress"
)

const (
	// tsaTimeout bounds one timestamp request, redirects included.
	tsaTimeout = 30 * time.Second
	// maxTSAResponse caps a TSA's reply.
	maxTSAResponse = verify.MaxTokenSize + 4<<10
)

// RFC3161 asks a time-stamping authority (RFC 3161) for a token over each checkpoint's bytes,
// through the egress dialer. The token is checked before it is kept: nonce, message imprint,
// signature, and the TSA certificate's chain (to ca_file's certificates, else the system
// roots) with the time-stamping key usage.
type RFC3161 struct {
	url    string
	name   string
	client *http.Client
	roots  *x509.CertPool
	caDER  [][]byte
}

// NewRFC3161 returns an anchor for the TSA at rawURL (http or https, no userinfo). caPEM,
// when not empty, holds the PEM certificates the TSA must chain to; they are also copied into
// the evidence as a hint for verifiers. policy is the egress policy of the request.
func NewRFC3161(rawURL string, caPEM []byte, policy egress.Policy) (*RFC3161, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, errors.New("rfc3161 anchor: want an http or https URL without userinfo")
	}
	a := &RFC3161{
		url:    rawURL,
		name:   "rfc3161:" + u.Scheme + "://" + u.Host + u.EscapedPath(),
		client: egress.NewDialer(policy, nil).Client(tsaTimeout),
	}
	if len(caPEM) == 0 {
		if a.roots, err = x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("rfc3161 anchor: system roots: %v", err)
		}
		return a, nil
	}
	a.roots = x509.NewCertPool()
	for rest := caPEM; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("rfc3161 anchor: CA certificate: %v", err)
		}
		a.roots.AddCert(c)
		a.caDER = append(a.caDER, blk.Bytes)
	}
	if len(a.caDER) == 0 {
		return nil, errors.New("rfc3161 anchor: the CA file holds no PEM certificate")
	}
	return a, nil
}

// Name is "rfc3161:" and the URL without its query string.
func (a *RFC3161) Name() string { return a.name }

// Anchor requests and checks a timestamp token over checkpoint. It keeps no history, so it
// does not call checkPrevious.
func (a *RFC3161) Anchor(ctx context.Context, checkpoint []byte, _ func(context.Context, []byte) error) (verify.Evidence, error) {
	nonce, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return verify.Evidence{}, err
	}
	req, err := timestamp.CreateRequest(bytes.NewReader(checkpoint), &timestamp.RequestOptions{
		Hash: crypto.SHA256, Certificates: true, Nonce: nonce,
	})
	if err != nil {
		return verify.Evidence{}, fmt.Errorf("timestamp request: %v", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(req))
	if err != nil {
		return verify.Evidence{}, fmt.Errorf("timestamp request to %s: %v", a.name, egress.RedactError(err))
	}
	hreq.Header.Set("Content-Type", "application/timestamp-query")
	hreq.Header.Set("Accept", "application/timestamp-reply")
	// Anchoring is rare (minutes apart): keep no idle connection between requests.
	defer a.client.CloseIdleConnections()
	resp, err := a.client.Do(hreq)
	if err != nil {
		return verify.Evidence{}, fmt.Errorf("timestamp request to %s: %w", a.name, egress.RedactError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return verify.Evidence{}, fmt.Errorf("timestamp request to %s: HTTP %d", a.name, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTSAResponse+1))
	if err != nil {
		return verify.Evidence{}, fmt.Errorf("timestamp reply from %s: %v", a.name, err)
	}
	if len(body) > maxTSAResponse {
		return verify.Evidence{}, fmt.Errorf("timestamp reply from %s: larger than %d bytes", a.name, maxTSAResponse)
	}
	ts, err := parseResponse(body)
	if err != nil {
		return verify.Evidence{}, fmt.Errorf("timestamp reply from %s: %v", a.name, err)
	}
	if ts.Nonce == nil || ts.Nonce.Cmp(nonce) != 0 {
		return verify.Evidence{}, fmt.Errorf("timestamp reply from %s: nonce does not match the request", a.name)
	}
	at, err := verify.CheckTimestamp(ts.RawToken, checkpoint, a.roots)
	if err != nil {
		return verify.Evidence{}, fmt.Errorf("timestamp reply from %s: %v", a.name, err)
	}
	sum := sha256.Sum256(checkpoint)
	return verify.Evidence{
		Type:             verify.AnchorRFC3161,
		Name:             a.name,
		At:               at,
		CheckpointSHA256: sum[:],
		Token:            ts.RawToken,
		CACerts:          a.caDER,
	}, nil
}

// parseResponse parses a TimeStampResp, turning a panic in the third-party ASN.1 code into an
// error: the reply is untrusted.
func parseResponse(body []byte) (ts *timestamp.Timestamp, err error) {
	defer func() {
		if r := recover(); r != nil {
			ts, err = nil, errors.New("malformed reply")
		}
	}()
	return timestamp.ParseResponse(body)
}
