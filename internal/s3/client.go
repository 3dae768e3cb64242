// Package s3 is agora's client of S3-compatible object storage (AWS S3, MinIO, versitygw, Ceph
// RGW...): the few calls the blob store and the checkpoint anchor need, path-style, signed with
// the AWS SDK's Signature Version 4 signer and sent through package egress.
//
// Why not the AWS SDK's s3 service client: it and its middleware stack would add a large,
// generated dependency to the agora binary for seven calls, and its endpoint resolution and
// retries would sit between agora and the egress policy. Only the signer is borrowed; it is
// the part worth not writing again.
//
// s3 runs on the host side and is never linked into the worker. Credentials come from the
// environment or a file the operator names (see [LoadCredentials]); they are never put in a
// name, an error, a log or a record: errors carry the endpoint's host, the bucket, the object
// key and the server's error code and message, with the access key id scrubbed out.
package s3

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/agora-dev/agora/internal/egress"
)

const (
	// requestTimeout bounds one request, body included.
	requestTimeout = 2 * time.Minute
	// maxErrorBody caps how much of an error reply is read.
	maxErrorBody = 64 << 10
	// maxListBody caps one ListObjectsV2 page (1,000 keys of ours are ~150 KB).
	maxListBody = 4 << 20
	// maxListPages caps the pages of one List: a million keys, twenty years of checkpoints
	// every ten minutes. A server answering every page as truncated with a fresh token would
	// otherwise keep List looping, no one request slow enough to time out.
	maxListPages = 1000
)

// Config says where objects live. Endpoint is an http or https URL (no userinfo, path, query);
// Bucket is a bucket name; Prefix, when set, is prepended to every key ("agora/" or "team-a/
// agora/"); Region is the signing region (default us-east-1).
type Config struct {
	Endpoint string
	Bucket   string
	Prefix   string
	Region   string
}

// Client talks to one bucket under one prefix. It is safe for concurrent use.
type Client struct {
	cfg    Config
	base   *url.URL
	prefix string // Config.Prefix, "" or ending in "/"
	creds  aws.Credentials
	http   *http.Client
	signer *v4.Signer
	now    func() time.Time
}

// New returns a client of cfg's bucket, checking cfg; it makes no request. policy is the
// egress policy of every request (a loopback or private endpoint must be allowed in it).
func New(cfg Config, creds Credentials, policy egress.Policy) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := creds.validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Endpoint)
	cfg.Region = cmp.Or(cfg.Region, "us-east-1")
	hc := egress.NewDialer(policy, nil).Client(requestTimeout)
	hc.CheckRedirect = refuseRedirect
	return &Client{
		cfg:    cfg,
		base:   &url.URL{Scheme: u.Scheme, Host: u.Host},
		prefix: normPrefix(cfg.Prefix),
		creds:  aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.SessionToken},
		http:   hc,
		signer: v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }),
		now:    time.Now,
	}, nil
}

// refuseRedirect refuses every redirect. Go's client would re-send a 307's body and every
// header but Authorization (the session token, X-Amz-Security-Token, included) to wherever the
// server points, and report the other host's 200 as the bucket's; an S3 server that redirects
// names another region or endpoint, which the operator fixes in the config.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("the server redirected to %s://%s: S3 requests are not redirected; check the endpoint and region", req.URL.Scheme, req.URL.Host)
}

// Where names the bucket for people: "s3://bucket/prefix at host". It holds no credentials.
func (c *Client) Where() string {
	return "s3://" + c.cfg.Bucket + "/" + c.prefix + " at " + c.base.Host
}

// ObjectURL names an object for people: "s3://bucket/prefix/name at host".
func (c *Client) ObjectURL(name string) string {
	return "s3://" + c.cfg.Bucket + "/" + c.prefix + name + " at " + c.base.Host
}

// CloseIdleConnections closes the client's idle connections (tests checking for leaked
// goroutines; a long-lived agora keeps them).
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Bucket is the bucket's name.
func (c *Client) Bucket() string { return c.cfg.Bucket }

// request is one call: the object name under the prefix ("" for the bucket itself).
type request struct {
	method string
	name   string
	query  url.Values
	header http.Header
	body   []byte
	md5    bool // send Content-MD5 (Object Lock puts need it)
	bucket bool // a call on the bucket itself: no object name
}

// do signs and sends r and returns the response when its status is 2xx; otherwise a *Error
// (closing the body). The caller closes a returned body.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	path := "/" + c.cfg.Bucket
	key := ""
	if !r.bucket {
		if err := checkName(r.name); err != nil {
			return nil, err
		}
		key = c.prefix + r.name
		path += "/" + key
	}
	u := *c.base
	u.Path = path
	u.RawPath = path // keys are of a charset that needs no escaping (checkName, checkPrefix)
	if len(r.query) > 0 {
		u.RawQuery = strings.ReplaceAll(r.query.Encode(), "+", "%20")
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), bytes.NewReader(r.body))
	if err != nil {
		return nil, fmt.Errorf("s3 %s %s: %w", r.method, c.Where(), err)
	}
	req.ContentLength = int64(len(r.body))
	if len(r.body) == 0 {
		req.Body = http.NoBody
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.md5 {
		sum := md5.Sum(r.body)
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	}
	payload := sha256.Sum256(r.body)
	hash := hex.EncodeToString(payload[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if err := c.signer.SignHTTP(ctx, c.creds, req, hash, "s3", c.cfg.Region, c.now().UTC()); err != nil {
		return nil, fmt.Errorf("s3 %s %s: sign: %w", r.method, c.Where(), err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &Error{Op: r.method, Where: c.Where(), Key: key, Kind: KindUnreachable,
			Message: c.scrub(egress.RedactError(err).Error())}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	code, msg := parseError(c.scrubBody(body))
	return nil, &Error{Op: r.method, Where: c.Where(), Key: key, Status: resp.StatusCode,
		Code: code, Message: c.scrub(msg), Kind: kindOf(resp.StatusCode, code, r.method, r.bucket)}
}

// scrub removes the access key id and the session token (both sent with every request, so a
// server may echo them) from text a server or the transport wrote; the secret key is never
// sent, but is removed too.
func (c *Client) scrub(s string) string {
	for _, r := range c.secrets() {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return truncate(s, 300)
}

// scrubBody is scrub on an error reply before it is parsed and cut: a long session token cut
// mid-way by the message's length cap would no longer match whole. The
// replacements hold no XML markup.
func (c *Client) scrubBody(b []byte) []byte {
	for _, r := range c.secrets() {
		b = bytes.ReplaceAll(b, []byte(r[0]), []byte("["+strings.Trim(r[1], "<>")+"]"))
	}
	return b
}

// secrets are the credentials with their placeholders, the set ones only.
func (c *Client) secrets() [][2]string {
	var out [][2]string
	for _, r := range [][2]string{{c.creds.AccessKeyID, "<access-key-id>"}, {c.creds.SecretAccessKey, "<secret>"}, {c.creds.SessionToken, "<session-token>"}} {
		if r[0] != "" {
			out = append(out, r)
		}
	}
	return out
}

// ObjectInfo is what a read or write says about an object.
type ObjectInfo struct {
	// VersionID is the object's version ("" when the bucket has no versioning).
	VersionID string
	// LockMode is GOVERNANCE or COMPLIANCE when the object is under Object Lock retention.
	LockMode string
	// RetainUntil is the end of that retention.
	RetainUntil time.Time
	// LastModified is when the object was last written (zero when the server said nothing).
	LastModified time.Time
}

// Lock asks for Object Lock retention on a put.
type Lock struct {
	Mode        string // COMPLIANCE or GOVERNANCE
	RetainUntil time.Time
}

// Put writes body as name. With ifAbsent the server refuses (ErrExists) when name already
// exists, where it supports conditional writes. lock, when not nil, sets Object Lock retention.
func (c *Client) Put(ctx context.Context, name string, body []byte, ifAbsent bool, lock *Lock) (ObjectInfo, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	if ifAbsent {
		h.Set("If-None-Match", "*")
	}
	if lock != nil {
		h.Set("X-Amz-Object-Lock-Mode", lock.Mode)
		h.Set("X-Amz-Object-Lock-Retain-Until-Date", lock.RetainUntil.UTC().Format(time.RFC3339))
	}
	resp, err := c.do(ctx, request{method: http.MethodPut, name: name, header: h, body: body, md5: lock != nil})
	if err != nil {
		return ObjectInfo{}, err
	}
	resp.Body.Close()
	return infoOf(resp.Header), nil
}

// Get reads name (a given version when versionID is set), refusing more than max bytes.
func (c *Client) Get(ctx context.Context, name, versionID string, max int64) ([]byte, ObjectInfo, error) {
	var q url.Values
	if versionID != "" {
		q = url.Values{"versionId": {versionID}}
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, name: name, query: q})
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > max {
		return nil, ObjectInfo{}, fmt.Errorf("s3 object %s%s in %s is %d bytes, over the %d-byte limit", c.prefix, name, c.Where(), resp.ContentLength, max)
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, ObjectInfo{}, &Error{Op: "GET", Where: c.Where(), Key: c.prefix + name, Kind: KindUnreachable, Message: c.scrub(egress.RedactError(err).Error())}
	}
	if n > max {
		return nil, ObjectInfo{}, fmt.Errorf("s3 object %s%s in %s is over the %d-byte limit", c.prefix, name, c.Where(), max)
	}
	return buf.Bytes(), infoOf(resp.Header), nil
}

// Head reports whether name exists (ErrNotFound when not) and its version and lock.
func (c *Client) Head(ctx context.Context, name string) (ObjectInfo, error) {
	resp, err := c.do(ctx, request{method: http.MethodHead, name: name})
	if err != nil {
		return ObjectInfo{}, err
	}
	resp.Body.Close()
	return infoOf(resp.Header), nil
}

// Delete removes name's version versionID ("" : the current one, leaving a delete marker in a
// versioned bucket). Inside Object Lock retention the server refuses (ErrLocked).
func (c *Client) Delete(ctx context.Context, name, versionID string) error {
	var q url.Values
	if versionID != "" {
		q = url.Values{"versionId": {versionID}}
	}
	resp, err := c.do(ctx, request{method: http.MethodDelete, name: name, query: q})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Retention reads the Object Lock retention of name's version versionID.
func (c *Client) Retention(ctx context.Context, name, versionID string) (Lock, error) {
	q := url.Values{"retention": {""}}
	if versionID != "" {
		q.Set("versionId", versionID)
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, name: name, query: q})
	if errors.Is(err, ErrNotFound) {
		// NoSuchObjectLockConfiguration (or a version gone since it was read): no lock holds it.
		return Lock{}, fmt.Errorf("%w: s3 retention of %s%s in %s: the object version carries no Object Lock retention (%v)", ErrNotLocked, c.prefix, name, c.Where(), err)
	}
	if err != nil {
		return Lock{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return Lock{}, fmt.Errorf("s3 retention of %s%s in %s: %w", c.prefix, name, c.Where(), egress.RedactError(err))
	}
	l, err := ParseRetention(body)
	if err != nil {
		return Lock{}, fmt.Errorf("s3 retention of %s%s in %s: %w", c.prefix, name, c.Where(), err)
	}
	return l, nil
}

// List returns the names (prefix removed) under dir ("anchors/agora/"), in the server's
// order (UTF-8 binary), every page.
func (c *Client) List(ctx context.Context, dir string) ([]string, error) {
	if err := checkName(dir + "x"); err != nil {
		return nil, err
	}
	var names []string
	token := ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("s3 list %s in %s: more than %d pages (%d keys so far); is the endpoint an S3 server?", dir, c.Where(), maxListPages, len(names))
		}
		q := url.Values{"list-type": {"2"}, "prefix": {c.prefix + dir}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		resp, err := c.do(ctx, request{method: http.MethodGet, query: q, bucket: true})
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("s3 list %s in %s: %w", dir, c.Where(), egress.RedactError(err))
		}
		page, err := ParseList(body)
		if err != nil {
			return nil, fmt.Errorf("s3 list %s in %s: %w", dir, c.Where(), err)
		}
		for _, k := range page.Keys {
			name, ok := strings.CutPrefix(k, c.prefix)
			if !ok || checkName(name) != nil {
				return nil, fmt.Errorf("s3 list %s in %s: the server returned key %q outside the prefix", dir, c.Where(), truncate(k, 80))
			}
			names = append(names, name)
		}
		if !page.Truncated {
			return names, nil
		}
		if page.Next == "" || page.Next == token {
			return nil, fmt.Errorf("s3 list %s in %s: a truncated page without a new continuation token", dir, c.Where())
		}
		token = page.Next
	}
}

// CheckBucket asks the server whether the bucket exists and the credentials may use it.
func (c *Client) CheckBucket(ctx context.Context) error {
	resp, err := c.do(ctx, request{method: http.MethodHead, bucket: true})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// CreateBucket creates the bucket, with Object Lock enabled (which turns on versioning) when
// objectLock is set. Tests and first-time setup use it; agora never creates buckets itself.
func (c *Client) CreateBucket(ctx context.Context, objectLock bool) error {
	h := http.Header{}
	if objectLock {
		h.Set("X-Amz-Bucket-Object-Lock-Enabled", "true")
	}
	resp, err := c.do(ctx, request{method: http.MethodPut, header: h, bucket: true})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func infoOf(h http.Header) ObjectInfo {
	info := ObjectInfo{VersionID: h.Get("X-Amz-Version-Id"), LockMode: h.Get("X-Amz-Object-Lock-Mode")}
	if t, err := time.Parse(time.RFC3339, h.Get("X-Amz-Object-Lock-Retain-Until-Date")); err == nil {
		info.RetainUntil = t.UTC()
	}
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		info.LastModified = t.UTC()
	}
	if info.VersionID == "null" {
		info.VersionID = ""
	}
	return info
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
