package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agora-dev/agora/internal/egress"
)

// ErrNoObjectLock says a bucket has no Object Lock configuration: its objects can be rewritten
// in place, so it cannot anchor checkpoints.
var ErrNoObjectLock = errors.New("Object Lock is not enabled on the bucket")

// CheckObjectLock asks the server whether the bucket has Object Lock enabled
// (GetObjectLockConfiguration). An anchor bucket without it is refused here, before a
// checkpoint's anchor fails on it (doctor passed such a bucket).
func (c *Client) CheckObjectLock(ctx context.Context) error {
	resp, err := c.do(ctx, request{method: http.MethodGet, query: url.Values{"object-lock": {""}}, bucket: true})
	if err != nil {
		var e *Error
		if errors.As(err, &e) && (e.Code == "ObjectLockConfigurationNotFoundError" || e.Code == "NoSuchObjectLockConfiguration") {
			return fmt.Errorf("%s: %w (create it with --object-lock-enabled-for-bucket)", c.Where(), ErrNoObjectLock)
		}
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return fmt.Errorf("s3 object lock of %s: %w", c.Where(), egress.RedactError(err))
	}
	enabled, err := ParseObjectLockConfiguration(body)
	if err != nil {
		return fmt.Errorf("s3 object lock of %s: %w", c.Where(), err)
	}
	if !enabled {
		return fmt.Errorf("%s: %w (create it with --object-lock-enabled-for-bucket)", c.Where(), ErrNoObjectLock)
	}
	return nil
}

type xmlObjectLock struct {
	XMLName           xml.Name `xml:"ObjectLockConfiguration"`
	ObjectLockEnabled string   `xml:"ObjectLockEnabled"`
}

// ParseObjectLockConfiguration reads a GetObjectLockConfiguration reply: whether
// ObjectLockEnabled is "Enabled".
func ParseObjectLockConfiguration(body []byte) (bool, error) {
	var l xmlObjectLock
	if err := decodeOne(body, &l); err != nil {
		return false, fmt.Errorf("object lock reply: %w", err)
	}
	return strings.TrimSpace(l.ObjectLockEnabled) == "Enabled", nil
}
