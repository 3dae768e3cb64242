package orch

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Limits of a review ([DecodeReview], [DecodeFinalReview]).
const (
	MaxReviewBytes   = 64 << 10 // bytes of a reviewer's final answer
	MaxReviewReasons = 32       // reasons in one review
	MaxReasonBytes   = 2 << 10  // bytes of one reason
)

// Review is what one reviewer concluded about a task's work: its final answer as the host
// read it ([DecodeFinalReview]), or a rejection the host wrote for it when that answer was
// missing, not vouched for or malformed (Invalid set, Reasons[0] saying why; it counts as a
// rejection).
type Review = api.Review

// reviewDoc is the review's form: approve is required.
type reviewDoc struct {
	Approve *bool    `json:"approve"`
	Reasons []string `json:"reasons"`
}

// ReviewFormat is the one form a review takes, as a reviewer is told it.
const ReviewFormat = `{"approve": true|false, "reasons": ["..."]}`

// DecodeReview reads a review object exactly (strictjson: no unknown key, no key twice, none
// in another case, so {"approve": true, "Approve": false} is refused), at most
// [MaxReviewBytes]: {"approve": BOOL, "reasons": [STRING, ...]}, approve required, at most
// [MaxReviewReasons] reasons of at most [MaxReasonBytes] each.
func DecodeReview(b []byte) (Review, error) {
	var d reviewDoc
	if err := strictjson.Decode("review", b, MaxReviewBytes, &d); err != nil {
		return Review{}, err
	}
	if d.Approve == nil {
		return Review{}, fmt.Errorf(`read review: "approve" is required: %s`, ReviewFormat)
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

// DecodeFinalReview reads a reviewer's final answer as its review: exactly one JSON object
// that [DecodeReview] takes, with nothing around it but white space, or that object alone in
// one fenced block (a line "```json" or "```", the object, a line "```"). Anything else (text
// before or after the object, two objects, a second fence) is refused with the problem named;
// at most [MaxReviewBytes] in all.
func DecodeFinalReview(b []byte) (Review, error) {
	if len(b) > MaxReviewBytes {
		return Review{}, fmt.Errorf("%d bytes; a review is at most %d", len(b), MaxReviewBytes)
	}
	if !utf8.Valid(b) {
		return Review{}, fmt.Errorf("not valid UTF-8; want only %s", ReviewFormat)
	}
	body := bytes.TrimSpace(b)
	if rest, ok := bytes.CutPrefix(body, []byte("```")); ok {
		tag, inner, nl := bytes.Cut(rest, []byte("\n"))
		if t := string(bytes.TrimSpace(tag)); !nl || (t != "" && t != "json") {
			return Review{}, fmt.Errorf("a fenced answer opens with a line \"```json\" or \"```\"; want only %s", ReviewFormat)
		}
		inner = bytes.TrimRight(inner, " \t\r\n")
		inner, ok = bytes.CutSuffix(inner, []byte("\n```"))
		if !ok {
			return Review{}, fmt.Errorf("the fence is not closed by a line \"```\" at the end; want only %s", ReviewFormat)
		}
		// What is left must be the object alone: DecodeReview refuses anything after it.
		body = bytes.TrimSpace(inner)
	}
	if len(body) == 0 {
		return Review{}, fmt.Errorf("empty; want only %s", ReviewFormat)
	}
	if body[0] != '{' {
		return Review{}, fmt.Errorf("it starts %s, not with the review object; want only %s", excerpt(body), ReviewFormat)
	}
	return DecodeReview(body)
}

// excerpt quotes the first bytes of b for an error.
func excerpt(b []byte) string {
	const n = 40
	if len(b) <= n {
		return strconv.Quote(string(b))
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return strconv.Quote(string(b[:cut]) + "…")
}

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
