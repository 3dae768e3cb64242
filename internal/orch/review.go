package orch

import (
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/reviewwire"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Limits of a review ([reviewwire]).
const (
	MaxReviewBytes   = reviewwire.MaxBytes       // bytes of a reviewer's final answer
	MaxReviewReasons = reviewwire.MaxReasons     // reasons in one review
	MaxReasonBytes   = reviewwire.MaxReasonBytes // bytes of one reason
)

// Review is what one reviewer concluded about a task's work: its final answer as the host
// read it ([DecodeFinalReview]), or a rejection the host wrote for it when that answer was
// missing, not vouched for or malformed (Invalid set, Reasons[0] saying why; it counts as a
// rejection).
type Review = api.Review

// ReviewFormat is the one form a review takes, as a reviewer is told it.
const ReviewFormat = reviewwire.Format

// DecodeFinalReview reads a reviewer's final answer as its review ([reviewwire.DecodeFinal]):
// exactly one review object, alone or in one fenced block; anything else is refused.
func DecodeFinalReview(b []byte) (Review, error) { return reviewwire.DecodeFinal(b) }

// InvalidReview is the rejection a reviewer's unusable final answer stands for: why says
// what was wrong with it.
func InvalidReview(why string) Review {
	return Review{Reasons: []string{"final answer: " + why}, Invalid: true}
}

// decodeStoredReview reads a review back from its task row.
func decodeStoredReview(s string) (*Review, error) {
	var v Review
	if err := strictjson.Decode("stored review", []byte(s), 2*MaxReviewBytes, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
