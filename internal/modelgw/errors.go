package modelgw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/agora-dev/agora/internal/egress"
)

// Decisions recorded in the audit log.
const (
	decisionAllowed = "allowed"
	decisionDenied  = "denied"
	decisionError   = "error"
)

// refusal is a request the gateway refuses on policy grounds: answered 403, audited as denied.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// describe renders err for the sandbox and the audit log: a refusal as is, an egress denial as
// "address A is R" or "host H refused: R", anything else with its URL cut to scheme and host.
func describe(err error) string {
	var rf *refusal
	if errors.As(err, &rf) {
		return rf.msg
	}
	var de *egress.DeniedError
	if errors.As(err, &de) {
		switch {
		case de.Addr.IsValid():
			return fmt.Sprintf("address %s is %s", de.Addr, de.Reason)
		case de.Host != "":
			return fmt.Sprintf("host %s refused: %s", quoted(de.Host, maxHostInError), de.Reason)
		default:
			return "refused: " + de.Reason
		}
	}
	return egress.RedactError(err).Error()
}

// classify maps an upstream error to the gateway's HTTP status, audit decision and message.
func classify(err error) (status int, decision, msg string) {
	var rf *refusal
	if errors.As(err, &rf) || errors.Is(err, egress.ErrDenied) {
		return http.StatusForbidden, decisionDenied, describe(err)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return http.StatusGatewayTimeout, decisionError, "upstream request timed out"
	}
	if errors.Is(err, context.Canceled) {
		return http.StatusBadGateway, decisionError, "request cancelled"
	}
	return http.StatusBadGateway, decisionError, "upstream request failed: " + describe(err)
}
