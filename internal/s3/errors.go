package s3

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
)

// Kinds of failure a caller acts on; match them with errors.Is on the sentinel errors.
const (
	KindOther         = ""
	KindUnreachable   = "unreachable"
	KindBucketMissing = "bucket missing"
	KindAuth          = "auth refused"
	KindNotFound      = "not found"
	KindExists        = "exists"
	KindLocked        = "locked"
)

var (
	// ErrUnreachable: the endpoint did not answer (refused, timed out, denied by egress).
	ErrUnreachable = errors.New("s3 endpoint unreachable")
	// ErrBucketMissing: the bucket does not exist.
	ErrBucketMissing = errors.New("s3 bucket missing")
	// ErrAuth: the server refused the credentials or their signature.
	ErrAuth = errors.New("s3 credentials refused")
	// ErrNotFound: no such object (or version).
	ErrNotFound = errors.New("s3 object not found")
	// ErrExists: a conditional write found the object already there.
	ErrExists = errors.New("s3 object already exists")
	// ErrLocked: Object Lock retention refused a delete or an overwrite.
	ErrLocked = errors.New("s3 object locked")
	// ErrNotLocked: an object version carries no Object Lock retention ([Client.Retention]).
	ErrNotLocked = errors.New("s3 object not locked")
)

// Error is a failed request. It names the endpoint's host, the bucket, the key, the status and
// the server's code and message (access key id scrubbed); never a credential.
type Error struct {
	Op      string
	Where   string
	Key     string
	Status  int
	Code    string
	Message string
	Kind    string
}

func (e *Error) Error() string {
	target := e.Where
	if e.Key != "" {
		target = "object " + e.Key + " in " + e.Where
	}
	switch e.Kind {
	case KindUnreachable:
		return fmt.Sprintf("s3 %s %s: cannot reach the endpoint: %s", e.Op, target, e.Message)
	case KindBucketMissing:
		return fmt.Sprintf("s3 %s %s: the bucket does not exist (create it, or fix blobs.s3.bucket / the anchor's bucket)", e.Op, target)
	case KindAuth:
		return fmt.Sprintf("s3 %s %s: the server refused agora's credentials (%d %s: %s); check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the credentials file, and the bucket's policy",
			e.Op, target, e.Status, orDash(e.Code), orDash(e.Message))
	case KindNotFound:
		return fmt.Sprintf("s3 %s %s: not found", e.Op, target)
	case KindExists:
		return fmt.Sprintf("s3 %s %s: the object already exists", e.Op, target)
	case KindLocked:
		return fmt.Sprintf("s3 %s %s: refused by Object Lock retention or the bucket's policy (%d %s: %s)", e.Op, target, e.Status, orDash(e.Code), orDash(e.Message))
	}
	return fmt.Sprintf("s3 %s %s: %d %s: %s", e.Op, target, e.Status, orDash(e.Code), orDash(e.Message))
}

// Is matches the sentinel of the error's kind.
func (e *Error) Is(target error) bool {
	switch e.Kind {
	case KindUnreachable:
		return target == ErrUnreachable
	case KindBucketMissing:
		return target == ErrBucketMissing
	case KindAuth:
		return target == ErrAuth
	case KindNotFound:
		return target == ErrNotFound
	case KindExists:
		return target == ErrExists
	case KindLocked:
		return target == ErrLocked
	}
	return false
}

// kindOf classifies a refusal by its status and S3 error code.
func kindOf(status int, code, method string, bucket bool) string {
	switch code {
	case "NoSuchBucket":
		return KindBucketMissing
	case "NoSuchKey", "NoSuchVersion", "NoSuchObjectLockConfiguration":
		return KindNotFound
	case "AccessDenied":
		if method == http.MethodDelete {
			// AWS and most servers refuse a delete inside Object Lock retention with
			// AccessDenied; the message says it may also be the bucket's policy.
			return KindLocked
		}
		return KindAuth
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AuthorizationHeaderMalformed":
		return KindAuth
	case "ObjectLocked", "InvalidRequest":
		if method == http.MethodDelete || method == http.MethodPut {
			return KindLocked
		}
	}
	switch status {
	case http.StatusPreconditionFailed, http.StatusConflict:
		if method == http.MethodPut {
			return KindExists
		}
	case http.StatusNotFound:
		if bucket {
			// HEAD on a bucket carries no body to say NoSuchBucket.
			return KindBucketMissing
		}
		return KindNotFound
	case http.StatusForbidden, http.StatusUnauthorized:
		return KindAuth
	}
	return KindOther
}

func orDash(s string) string {
	return cmp.Or(s, "-")
}
