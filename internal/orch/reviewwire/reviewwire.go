// Package reviewwire reads a reviewer's final answer as its review: one JSON object,
// {"approve": BOOL, "reasons": [...]}, read exactly. It runs on the host, over what a model
// wrote (so anything may reach it); it imports [api] for the review's type and
// [strictjson], and lives apart from the orchestrator engine so its fuzz targets build
// without the engine's import graph.
package reviewwire

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Limits of a review ([Decode], [DecodeFinal]).
const (
	MaxBytes       = 64 << 10 // bytes of a reviewer's final answer
	MaxReasons     = 32       // reasons in one review
	MaxReasonBytes = 2 << 10  // bytes of one reason
)

// reviewDoc is the review's form: approve is required.
type reviewDoc struct {
	Approve *bool    `json:"approve"`
	Reasons []string `json:"reasons"`
}

// Format is the one form a review takes, as a reviewer is told it.
const Format = `{"approve": true|false, "reasons": ["..."]}`

// Decode reads a review object exactly (strictjson: no unknown key, no key twice, none
// in another case, so {"approve": true, "Approve": false} is refused), at most
// [MaxBytes]: {"approve": BOOL, "reasons": [STRING, ...]}, approve required, at most
// [MaxReasons] reasons of at most [MaxReasonBytes] each.
func Decode(b []byte) (api.Review, error) {
	var d reviewDoc
	if err := strictjson.Decode("review", b, MaxBytes, &d); err != nil {
		return api.Review{}, err
	}
	if d.Approve == nil {
		return api.Review{}, fmt.Errorf(`read review: "approve" is required: %s`, Format)
	}
	if len(d.Reasons) > MaxReasons {
		return api.Review{}, fmt.Errorf("read review: %d reasons; at most %d", len(d.Reasons), MaxReasons)
	}
	for i, r := range d.Reasons {
		if len(r) > MaxReasonBytes {
			return api.Review{}, fmt.Errorf("read review: reason %d is %d bytes; at most %d", i, len(r), MaxReasonBytes)
		}
		if !utf8.ValidString(r) {
			return api.Review{}, fmt.Errorf("read review: reason %d is not valid UTF-8", i)
		}
	}
	r := api.Review{Approve: *d.Approve, Reasons: d.Reasons}
	if r.Reasons == nil {
		r.Reasons = []string{}
	}
	return r, nil
}

// DecodeFinal reads a reviewer's final answer as its review: exactly one JSON object
// that [Decode] takes, with nothing around it but white space, or that object alone in
// one fenced block (a line "```json" or "```", the object, a line "```"). Anything else (text
// before or after the object, two objects, a second fence) is refused with the problem named;
// at most [MaxBytes] in all.
func DecodeFinal(b []byte) (api.Review, error) {
	if len(b) > MaxBytes {
		return api.Review{}, fmt.Errorf("%d bytes; a review is at most %d", len(b), MaxBytes)
	}
	if !utf8.Valid(b) {
		return api.Review{}, fmt.Errorf("not valid UTF-8; want only %s", Format)
	}
	body := bytes.TrimSpace(b)
	if rest, ok := bytes.CutPrefix(body, []byte("```")); ok {
		tag, inner, nl := bytes.Cut(rest, []byte("\n"))
		if t := string(bytes.TrimSpace(tag)); !nl || (t != "" && t != "json") {
			return api.Review{}, fmt.Errorf("a fenced answer opens with a line \"```json\" or \"```\"; want only %s", Format)
		}
		inner = bytes.TrimRight(inner, " \t\r\n")
		inner, ok = bytes.CutSuffix(inner, []byte("\n```"))
		if !ok {
			return api.Review{}, fmt.Errorf("the fence is not closed by a line \"```\" at the end; want only %s", Format)
		}
		// What is left must be the object alone: Decode refuses anything after it.
		body = bytes.TrimSpace(inner)
	}
	if len(body) == 0 {
		return api.Review{}, fmt.Errorf("empty; want only %s", Format)
	}
	if body[0] != '{' {
		return api.Review{}, fmt.Errorf("it starts %s, not with the review object; want only %s", excerpt(body), Format)
	}
	return Decode(body)
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
