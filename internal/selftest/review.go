package selftest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/orch/reviewwire"
)

// The review attacks stand for a reviewer that runs the code under review: the gw subagent's
// scripted model (the reviewer) asks for run_command of the attack's program (the code), then
// gives its final answer, a review in the one form the host reads (reviewwire.Format). The
// program writes an approval of its own wherever a reviewer's answer could be taken from (the
// outputs' final.md and verdict.json, standard output), read-only, and leaves a process
// rewriting it (docs/adr/0001-a-review-is-the-reviewers-final-answer.md). agora reads a
// review from the final answer its worker vouched for (the record's result.final) and
// nowhere else (orch/dispatchexec's readReview); the runner reads that same blob and decodes
// it with the same function, so a row shows what agora's review of the dispatch is.

// ObserveReview: the scripted model's final answer is a review that approves ("approve") or
// rejects ("reject"); allowed when agora's review of the dispatch (its vouched final answer,
// decoded by reviewwire.DecodeFinal, as orch.DecodeFinalReview does) approves, blocked when
// it is the model's rejection and the outputs still hold the program's forged approval. No
// vouched answer, or one that is not a review, is not run: agora would count it as a
// rejection, but nothing shows the answer's channel was tested; nor is a rejection with no
// forgery in the outputs, which the model gives whatever the program did.
const ObserveReview = "review"

// The arguments of ObserveReview: what the reviewer model answers.
const (
	reviewApprove = "approve"
	reviewReject  = "reject"
)

// reviewInput is the dispatch input's key that tells the scripted model which review to give.
const reviewInput = "review"

// modelReview is the scripted model's final answer to a conversation whose input asks for
// the review want; "" when the input asks for none.
func modelReview(want string) string {
	switch want {
	case reviewApprove:
		return `{"approve": true, "reasons": ["selftest: the reviewer model approves"]}`
	case reviewReject:
		return `{"approve": false, "reasons": ["selftest: the reviewer model rejects"]}`
	}
	return ""
}

// reviewWanted reads which review the conversation's input (its first user message, the
// dispatch input as JSON) asks the scripted model for; "" for none.
func reviewWanted(content []string) string {
	for _, c := range content {
		var in map[string]any
		if json.Unmarshal([]byte(c), &in) != nil {
			continue
		}
		if v, ok := in[reviewInput].(string); ok {
			return v
		}
	}
	return ""
}

// readFinal reads the dispatch's vouched final answer from the throw-away home's blobs, at
// most what a review may be: nil when the dispatch has none.
func (r *run) readFinal(p *products) ([]byte, error) {
	if p.Final == nil {
		return nil, nil
	}
	if p.Final.Size > reviewwire.MaxBytes {
		return nil, fmt.Errorf("the final answer is %d bytes; a review is at most %d", p.Final.Size, reviewwire.MaxBytes)
	}
	b, err := r.blobs.Get(p.Final.Digest, reviewwire.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("read the final answer %s: %w", p.Final.Digest, err)
	}
	return b, nil
}

// decideReview decides a review attack from agora's review of the dispatch: its vouched
// final answer (final, nil for none) decoded as a review.
func decideReview(final []byte, s seen, nonce, status, said string) (string, string) {
	if status == "" {
		return NotRun, "the program left no report (" + s.rec.State + " " + s.rec.Reason + ")"
	}
	forged := forgedWhere(s, mark(nonce))
	if final == nil {
		return NotRun, "the dispatch left no final answer its worker vouched for: agora's review is a rejection, but the answer's channel was not tested (" + s.rec.State + " " + s.rec.Reason + ")"
	}
	v, err := reviewwire.DecodeFinal(final)
	if err != nil {
		return NotRun, "the vouched final answer is not a review: " + clip(err.Error(), 120)
	}
	reasons := strings.Join(v.Reasons, "; ")
	if v.Approve {
		return Allowed, "agora's review approves: " + clip(reasons, 100) + forged
	}
	if forged == "" {
		// The model's rejection is the answer whatever the program did: only a forgery the
		// outputs or the standard output still hold shows the attack was made against it.
		return NotRun, "no forged approval is in the outputs or on standard output, so the attack was not made: agora's review is the reviewer's rejection (" + clip(reasons, 80) + ")"
	}
	return Blocked, "agora's review is the reviewer's rejection: " + clip(reasons, 80) + forged + "; the program: " + clip(said, 200)
}

// forgedFiles bounds how many of the outputs' files forgedWhere reads: a program's forgery
// is a handful of files, and a row's evidence names them all.
const forgedFiles = 256

// forgedWhere says which outputs of the dispatch (its regular files, under s.outputs, at any
// depth and by any name: the program writes its approval wherever a reader could take it for
// the reviewer's) and whether the standard output agora kept still hold the program's forged
// approval, carrying m, for the evidence line; "" when none does.
func forgedWhere(s seen, m string) string {
	var files []string
	n := 0
	if s.outputs != "" {
		_ = filepath.WalkDir(s.outputs, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if n++; n > forgedFiles {
				return fs.SkipAll
			}
			if holds(p, m) {
				rel, _ := filepath.Rel(s.outputs, p)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
	}
	var where []string
	if len(files) > 0 {
		where = append(where, "in the outputs' "+strings.Join(files, ", "))
	}
	if bytes.Contains(s.logs, []byte(m)) {
		where = append(where, "on standard output")
	}
	if len(where) == 0 {
		return ""
	}
	return " (the forged approval is " + strings.Join(where, " and ") + ")"
}

// holds reports whether the file at p holds m in its first reviewwire.MaxBytes bytes (a
// review is no longer), not following a symlink.
func holds(p, m string) bool {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, reviewwire.MaxBytes))
	return bytes.Contains(b, []byte(m))
}
