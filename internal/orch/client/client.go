// Package client talks to `agora orch serve` over its Unix socket. The CLI and the MCP server
// use it; neither ever opens orch.db. It imports only the wire types.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/orch/api"
)

// ErrNotRunning means nothing answers on the socket.
var ErrNotRunning = errors.New("the orchestrator is not running")

// Error is an error answer of the service.
type Error struct {
	Status int
	Code   string // not_found, invalid, conflict, unavailable, internal, forbidden
	Msg    string
	Note   string // more about a not_found (a run retention purged: when, by whom, why)
}

func (e *Error) Error() string { return e.Msg }

// Class is the service's code as a failure class (not_found, invalid), so the CLI's exit code
// follows the code, never the message.
func (e *Error) Class() errclass.Class {
	switch e.Code {
	case "not_found":
		return errclass.NotFound
	case "invalid":
		return errclass.Invalid
	}
	return errclass.Failure
}

// Client is a connection to the service.
type Client struct {
	socket string
	hc     *http.Client
	// Traceparent, when set, gives the W3C traceparent of the span in a request's context,
	// sent as the traceparent header so a submitted run joins the caller's trace ("" sends
	// none). The client links no tracing of its own.
	Traceparent func(context.Context) string
}

// New returns a client of the service listening on socket.
func New(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns: 4,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("read orchestrator answer: %w", err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://orch"+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Traceparent != nil {
		if tp := c.Traceparent(ctx); tp != "" {
			req.Header.Set("traceparent", tp)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w (no service on %s): start it with 'agora orch serve'", ErrNotRunning, c.socket)
		}
		return nil, fmt.Errorf("reach the orchestrator on %s: %w", c.socket, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		var e api.Error
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e); err != nil || e.Error == "" {
			return nil, &Error{Status: resp.StatusCode, Code: "internal", Msg: "orchestrator answered " + resp.Status}
		}
		return nil, &Error{Status: resp.StatusCode, Code: e.Code, Msg: e.Error, Note: e.Note}
	}
	return resp, nil
}

// Health checks that the service answers and returns its pid and engine snapshot.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.do(ctx, http.MethodGet, "/v1/health", nil, &h)
	return h, err
}

// Queues lists the queues with their running tasks and depth.
func (c *Client) Queues(ctx context.Context) ([]api.Queue, error) {
	var out api.Queues
	err := c.do(ctx, http.MethodGet, "/v1/queues", nil, &out)
	return out.Queues, err
}

// Schedules lists the schedules by name.
func (c *Client) Schedules(ctx context.Context) ([]api.Schedule, error) {
	var out api.Schedules
	err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, &out)
	return out.Schedules, err
}

// Schedule returns one schedule with its recent runs.
func (c *Client) Schedule(ctx context.Context, name string) (api.Schedule, error) {
	var out api.Schedule
	err := c.do(ctx, http.MethodGet, "/v1/schedules/"+url.PathEscape(name), nil, &out)
	return out, err
}

// AddSchedule adds a schedule; the service validates its spec, zone and plan first.
func (c *Client) AddSchedule(ctx context.Context, req api.ScheduleRequest) (api.Schedule, error) {
	var out api.Schedule
	err := c.do(ctx, http.MethodPost, "/v1/schedules", req, &out)
	return out, err
}

// RemoveSchedule removes a schedule and returns it as it was.
func (c *Client) RemoveSchedule(ctx context.Context, name, actor string) (api.Schedule, error) {
	var out api.Schedule
	err := c.do(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(name)+"/remove", api.ScheduleRemoveRequest{Actor: actor}, &out)
	return out, err
}

// Submit starts a run.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	var out api.SubmitResponse
	err := c.do(ctx, http.MethodPost, "/v1/runs", req, &out)
	return out, err
}

// Runs lists runs, newest first.
func (c *Client) Runs(ctx context.Context, limit int) ([]api.Run, error) {
	var out []api.Run
	err := c.do(ctx, http.MethodGet, "/v1/runs?limit="+strconv.Itoa(limit), nil, &out)
	return out, err
}

// Status returns a run by id or name, with its tasks.
func (c *Client) Status(ctx context.Context, ref string) (api.Run, error) {
	var out api.Run
	err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(ref), nil, &out)
	return out, err
}

// Action is cancel, answer, retry or seal; it returns the run after the action.
func (c *Client) Action(ctx context.Context, action string, req api.ActionRequest) (api.Run, error) {
	var out api.Run
	err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(req.Run)+"/"+url.PathEscape(action), req, &out)
	return out, err
}

// Audit returns a sealed run's part of orch.db as an audit bundle.
func (c *Client) Audit(ctx context.Context, ref string) (*verify.Bundle, error) {
	var b verify.Bundle
	if err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(ref)+"/audit", nil, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Watch calls fn with the run's state first and after each run-level change, and with every
// event between, until the run ends, fn returns an error, or ctx ends. When the service
// drops a slow watcher, Watch starts again from the current state.
func (c *Client) Watch(ctx context.Context, ref string, fn func(run *api.Run, ev *api.Event) error) error {
	for {
		lagged, err := c.watchOnce(ctx, ref, fn)
		if err != nil || !lagged {
			return err
		}
	}
}

func (c *Client) watchOnce(ctx context.Context, ref string, fn func(run *api.Run, ev *api.Event) error) (bool, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(ref)+"/watch", nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var line struct {
			Run    *api.Run   `json:"run"`
			Event  *api.Event `json:"event"`
			Lagged bool       `json:"lagged"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return false, fmt.Errorf("read orchestrator watch stream: %w", err)
		}
		if line.Run == nil && line.Event == nil {
			continue // keepalive
		}
		if err := fn(line.Run, line.Event); err != nil {
			return false, err
		}
		if line.Lagged {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("orchestrator watch stream: %w", err)
	}
	return false, nil
}
