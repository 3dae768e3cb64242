package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// A warm worker starts before its dispatch exists, holding only its slot's token (in
// [remote.TokenEnv], as a cold worker holds its dispatch's, with [remote.SlotEnv] naming the
// slot). [ClaimFromEnv] takes both out of the environment and waits on the gateway until the
// host binds a dispatch to the slot; the answer names the dispatch and carries its session
// token, and the slot's token is dead from that moment. From there the worker is a cold one:
// [StartClient] with the returned client. This is all a warm worker adds; a pod of another
// backend (an agent-sandbox warm pool) needs only the same two variables and these two calls.

// ClaimFromEnv claims the slot named by the environment and returns the bound dispatch's
// client. The gateway variables are removed from the environment first, as [FromEnv] does.
// The token is [remote.TokenEnv]'s, or fd 3's when that is unset (a docker slot); the gateway
// is reached through [remote.GatewaySocketEnv] when it is set.
func ClaimFromEnv(ctx context.Context, log io.Writer) (*Client, error) {
	var token, slot string
	var terr error
	if path := os.Getenv(remote.SlotFileEnv); path != "" {
		// An agent-sandbox pool pod: its init step enrolled and left the slot here.
		var a remote.EnrollAnswer
		a, terr = slotFromFile(path)
		token, slot = a.Token, a.Slot
	} else {
		token, terr = slotToken()
		slot = os.Getenv(remote.SlotEnv)
	}
	u, ca, sock := os.Getenv(remote.GatewayURLEnv), os.Getenv(remote.CAEnv), os.Getenv(remote.GatewaySocketEnv)
	for _, k := range []string{remote.GatewayURLEnv, remote.SlotEnv, remote.SlotFileEnv, remote.TokenEnv, remote.CAEnv, remote.GatewaySocketEnv} {
		os.Unsetenv(k)
	}
	if terr != nil {
		return nil, terr
	}
	return ClaimVia(ctx, u, sock, slot, token, []byte(ca), log)
}

// Claim asks the gateway at rawURL for slot's dispatch with the slot's token until one is
// bound, ctx ends, or the gateway refuses the slot (claimed, revoked, its holder gone). A
// gateway that goes away is retried for [OutageLimit]; a grant lost in an outage (the slot was
// spent by an attempt whose answer never came) is a [LostError].
func Claim(ctx context.Context, rawURL, slot, token string, caPEM []byte, log io.Writer) (*Client, error) {
	return ClaimVia(ctx, rawURL, "", slot, token, caPEM, log)
}

// ClaimVia is [Claim] through the Unix socket at socket when it is not empty (a docker warm
// slot's only way out: [NewSocketClient]); the returned client reaches the gateway the same way.
func ClaimVia(ctx context.Context, rawURL, socket, slot, token string, caPEM []byte, log io.Writer) (*Client, error) {
	if !remote.ValidSlotID(slot) {
		return nil, fmt.Errorf("slot id %q is not valid (%s)", slot, remote.SlotEnv)
	}
	sc, err := NewSocketClient(rawURL, socket, slot, token, caPEM)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	sc.log = log
	url := sc.base.String() + remote.SlotRoutePrefix + slot + "/" + remote.ClaimRoute
	r := sc.retry("POST claim")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+sc.token)
		resp, err := sc.http.Do(req)
		switch {
		case err == nil && resp.StatusCode == http.StatusOK:
			r.recovered()
			return grantClient(resp, rawURL, socket, caPEM)
		case err == nil && resp.StatusCode == http.StatusNoContent:
			resp.Body.Close()
			r.recovered()
			continue // no dispatch yet: ask again
		case err == nil:
			err = statusError(http.MethodPost, "claim", resp)
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized && r.unanswered {
				return nil, &LostError{Op: "POST claim", Err: err}
			}
			if !transientStatus(resp.StatusCode) {
				return nil, err
			}
		case !transient(ctx, err):
			return nil, fmt.Errorf("POST claim: %w", err)
		default:
			r.unanswered = true
		}
		if werr := r.wait(ctx, err); werr != nil {
			return nil, werr
		}
	}
}

// grantClient reads a claim's answer and returns the client of the dispatch it names.
func grantClient(resp *http.Response, rawURL, socket string, caPEM []byte) (*Client, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, remote.MaxSlotGrant+1))
	defer clear(b)
	if err != nil || len(b) > remote.MaxSlotGrant {
		return nil, errors.Join(errors.New("POST claim: the answer was cut or too long"), err)
	}
	g, err := ParseGrant(b)
	if err != nil {
		return nil, err
	}
	return NewSocketClient(rawURL, socket, g.Dispatch, g.Token, caPEM)
}

// ParseGrant reads a claim's answer: exactly a dispatch id and a gateway token.
func ParseGrant(b []byte) (remote.SlotGrant, error) {
	var g remote.SlotGrant
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&g); err != nil || d.More() {
		return remote.SlotGrant{}, errors.New("POST claim: the answer is not a grant")
	}
	if g.Dispatch == "" || len(g.Dispatch) > 128 || strings.ContainsAny(g.Dispatch, "/?#% ") || !strings.HasPrefix(g.Token, "agw_") || len(g.Token) > 128 {
		return remote.SlotGrant{}, errors.New("POST claim: the grant names no valid dispatch and token")
	}
	return g, nil
}

// Dispatch is the id of the dispatch the client talks to.
func (c *Client) Dispatch() string { return c.dispatch }
