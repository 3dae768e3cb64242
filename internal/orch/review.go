package orch

import (
	"fmt"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Limits of a review ([DecodeReview]).
const (
	MaxReviewBytes   = 64 << 10 // bytes of outputs/verdict.json
	MaxReviewReasons = 32       // reasons in one review
	MaxReasonBytes   = 2 << 10  // bytes of one reason
)

// Review is what one reviewer concluded about a task's work: its outputs/verdict.json as the
// host read it, or a rejection the host wrote for it when that file was missing or malformed
// (Invalid set, Reasons[0] saying why; it counts as a rejection).
type Review = api.Review

// reviewDoc is the file's form: approve is required.
type reviewDoc struct {
	Approve *bool    `json:"approve"`
	Reasons []string `json:"reasons"`
}

// DecodeReview reads a reviewer's verdict.json exactly (strictjson: no unknown key, no key
// twice, none in another case, so {"approve": true, "Approve": false} is refused), at most
// [MaxReviewBytes]: {"approve": BOOL, "reasons": [STRING, ...]}, approve required, at most
// [MaxReviewReasons] reasons of at most [MaxReasonBytes] each.
func DecodeReview(b []byte) (Review, error) {
	var d reviewDoc
	if err := strictjson.Decode("review", b, MaxReviewBytes, &d); err != nil {
		return Review{}, err
	}
	if d.Approve == nil {
		return Review{}, fmt.Errorf(`read review: "approve" is required: {"approve": true|false, "reasons": [...]}`)
	}
	if len(d.Reasons) > MaxReviewReasons {
		return Review{}, fmt.Errorf("read review: %d reasons; at most %d", len(d.Reasons), MaxReviewReasons)
	}
	for i, r := range d.Reasons {
		if len(r) > MaxReasonBytes {
			return Review{}, fmt.Errorf("read review: reason %d is %d bytes; at most %d", i, len(r), MaxReasonBytes)
		}
		if !utf8.ValidString(r) {
			return Review{}, fmt.Errorf("read review: reason %d is not valid UTF-8", i)
		}
	}
	r := Review{Approve: *d.Approve, Reasons: d.Reasons}
	if r.Reasons == nil {
		r.Reasons = []string{}
	}
	return r, nil
}

// InvalidReview is the rejection a reviewer's unreadable file stands for.
func InvalidReview(why string) Review {
	return Review{Reasons: []string{"outputs/verdict.json: " + why}, Invalid: true}
}

// decodeStoredReview reads a review back from its task row.
func decodeStoredReview(s string) (*Review, error) {
	var v Review
	if err := strictjson.Decode("stored review", []byte(s), 2*MaxReviewBytes, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
