package dispatchexec

import (
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch"
)

// The products the engine decides on (a fan-out's list, a reviewer's review) are read from
// what the host collected when the dispatch ended: the dispatcher read each output beneath
// the sandbox's out directory through sandboxfs (no symlink on the path, a regular file with
// one link, at most its size limit, the SHA-256 the worker declared) and stored it in the
// blob store. Here the host reads that stored copy by its digest, capped, and decodes it
// exactly; nothing is read from a path the sandbox could still change, and nothing an agent
// says about its own output is believed.

// readLists reads each of paths from rec's outputs as a fan-out list.
func (x *Executor) readLists(rec *dispatch.Record, paths []string) map[string]orch.ItemList {
	out := make(map[string]orch.ItemList, len(paths))
	for _, p := range paths {
		b, err := x.readOutput(rec, p, orch.MaxItemsBytes)
		if err != nil {
			out[p] = orch.ItemList{Err: err.Error()}
			continue
		}
		items, err := orch.DecodeItems(b)
		if err != nil {
			out[p] = orch.ItemList{Err: err.Error()}
			continue
		}
		out[p] = orch.ItemList{Items: items}
	}
	return out
}

// readReview reads a reviewer's review from its final answer: the one its worker vouched for
// (dispatch.Result.Final: the model's answer as the worker received it over a channel no
// process of the reviewer could write, written after every such process was stopped), never
// a file of its outputs, which the reviewed code, once the reviewer runs it, can write as
// well as the reviewer. No vouched answer, or one that is not exactly the review object, is
// a rejection saying why.
func (x *Executor) readReview(rec *dispatch.Record) orch.Review {
	if rec.Result == nil || rec.Result.Final == nil {
		return orch.InvalidReview(noFinalAnswer)
	}
	f := rec.Result.Final
	if f.Size > orch.MaxReviewBytes {
		return orch.InvalidReview(fmt.Sprintf("%d bytes; a review is at most %d", f.Size, orch.MaxReviewBytes))
	}
	b, err := x.D.Blobs.Get(f.Digest, orch.MaxReviewBytes)
	if errors.Is(err, blob.ErrNotFound) {
		return orch.InvalidReview(fmt.Sprintf("its stored copy %s is gone", f.Digest))
	}
	if err != nil {
		return orch.InvalidReview(err.Error())
	}
	v, err := orch.DecodeFinalReview(b)
	if err != nil {
		return orch.InvalidReview(err.Error())
	}
	return v
}

// noFinalAnswer is why a reviewer that left no vouched final answer rejects.
const noFinalAnswer = "the reviewer left no final answer its worker vouches for: a review is a model's final answer, " +
	"taken by the worker over a channel no process the reviewer starts can write (an openai subagent; claude-code or " +
	"codex only where agora runs the host's CLI execute-only, a local sandboxed target), written after those processes " +
	"were stopped; an exec command, a run that ended without an answer, or a CLI its own tools could reach leaves none " +
	"(the dispatch's stderr says which)"

// errMissing is an output the dispatch did not leave.
var errMissing = errors.New("the dispatch left no such output")

// readOutput reads output path of rec from the blob store, at most limit bytes.
func (x *Executor) readOutput(rec *dispatch.Record, path string, limit int64) ([]byte, error) {
	if rec.Result == nil {
		return nil, errMissing
	}
	for _, o := range rec.Result.Outputs {
		if o.Path != path {
			continue
		}
		if o.Size > limit {
			return nil, fmt.Errorf("%d bytes; at most %d", o.Size, limit)
		}
		b, err := x.D.Blobs.Get(o.Digest, limit)
		if errors.Is(err, blob.ErrNotFound) {
			return nil, fmt.Errorf("its stored copy %s is gone", o.Digest)
		}
		return b, err
	}
	return nil, errMissing
}
