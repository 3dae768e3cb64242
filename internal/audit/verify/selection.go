package verify

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// SelectionHeader is the first line of a signed selection's text. It names the statement's
// version and keeps it apart from the checkpoints the same key signs: a checkpoint's second
// line is a decimal size, a selection's never is.
const SelectionHeader = "agora-audit-selection/v1"

// maxSignatureLines caps what a signed selection may hold beyond the text it signs: one
// signature line ("— <name> <base64>") of an Ed25519 key is under 200 bytes.
const maxSignatureLines = 1 << 10

// SelectionText returns the statement an exporter signs over b: the log (origin), the format,
// the selection (run, from_index, end_index, kind, subjects, count) and the SHA-256 of the
// included entries' indexes (see [IndexesDigest]). One key and one value a line, strings
// quoted as ASCII Go strings, so any value has one unambiguous, printable form:
//
//	agora-audit-selection/v1
//	origin "agora/0123456789abcdef/agora.db"
//	format "agora-audit-bundle/v3"
//	run ""
//	from_index 0
//	end_index 16
//	kind "dispatch.*"
//	subjects 0
//	count 6
//	indexes sha256:<hex>
//
// with one `subject "..."` line per subject after `subjects N`. The verifier recomputes it
// from the bundle and compares it byte for byte with the signed text, so nothing of it is
// ever parsed.
func SelectionText(b *Bundle) []byte { return selectionText(b, IndexesDigest(b.Entries)) }

// SelectionTextOf is [SelectionText] with the entries' [IndexesDigest] given, for a writer
// that streams its entries rather than holding them in b.
func SelectionTextOf(b *Bundle, indexes string) []byte { return selectionText(b, indexes) }

// selectionText is [SelectionText] with the entries' [IndexesDigest] given.
func selectionText(b *Bundle, indexes string) []byte {
	sel := b.Selection
	var s strings.Builder
	fmt.Fprintf(&s, "%s\norigin %s\nformat %s\nrun %s\nfrom_index %d\nend_index %d\nkind %s\nsubjects %d\n",
		SelectionHeader, strconv.QuoteToASCII(b.Origin), strconv.QuoteToASCII(b.Format), strconv.QuoteToASCII(sel.Run),
		sel.FromIndex, sel.EndIndex, strconv.QuoteToASCII(sel.Kind), len(sel.Subjects))
	for _, sub := range sel.Subjects {
		fmt.Fprintf(&s, "subject %s\n", strconv.QuoteToASCII(sub))
	}
	fmt.Fprintf(&s, "count %d\nindexes %s\n", sel.Count, indexes)
	return []byte(s.String())
}

// IndexesDigest is "sha256:<hex>" of the entries' indexes in bundle order, each as 8 bytes
// big-endian: it pins exactly which entries the exporter included.
func IndexesDigest(es []Entry) string {
	h := sha256.New()
	var buf [8]byte
	for _, e := range es {
		binary.BigEndian.PutUint64(buf[:], e.Index)
		h.Write(buf[:])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// SignSelection signs [SelectionText] of b with s (the log's audit key) and stores the note
// in b.SelectionNote. It MUST be called after b's selection and entries are final.
func SignSelection(b *Bundle, s note.Signer) error {
	signed, err := note.Sign(&note.Note{Text: string(SelectionText(b))}, s)
	if err != nil {
		return fmt.Errorf("sign audit selection: %w", err)
	}
	b.SelectionNote = signed
	return nil
}

// checkSelection checks that the log's key signed this bundle's selection and entry list: an
// entry removed or added, or a changed from_index, end_index, count, kind, subjects or run,
// no longer matches the signed text. A bundle of a format from before selections were signed
// fails: nothing in it can show that entries were not removed. So does a part of a run bundle
// checked on its own ([Verify] rather than [VerifyRun]).
func (v *verifier) checkSelection() {
	b := v.b
	if b.legacy() {
		v.fail(CheckSelection, "", "format %s carries no signed selection, so entries removed from it cannot be detected; export it again with this agora (format %s)",
			b.Format, Format)
		return
	}
	if v.key == nil {
		v.fail(CheckSelection, "", "cannot check the signature: no usable key")
		return
	}
	if len(b.SelectionNote) == 0 {
		v.fail(CheckSelection, "", "the bundle carries no signed selection (selection_note)")
		return
	}
	var want []byte
	if v.stream != nil {
		want = selectionText(b, v.stream.indexesDigest())
	} else {
		want = SelectionText(b)
	}
	if len(b.SelectionNote) > len(want)+maxSignatureLines {
		v.fail(CheckSelection, "", "signed selection is %d bytes, more than the %d-byte selection it must sign and one signature",
			len(b.SelectionNote), len(want))
		return
	}
	text, err := openNote(b.SelectionNote, v.key)
	if err != nil {
		v.fail(CheckSelection, "", "signed selection: %v", err)
		return
	}
	if text != string(want) {
		signed, got := firstDifference(text, string(want))
		v.fail(CheckSelection, "", "the signed selection says %s, the bundle says %s", signed, got)
		return
	}
	if run := b.Selection.Run; run != "" && !v.inRun {
		v.fail(CheckSelection, "", "signed as a part of run %s: a part alone cannot show that none of the run's dispatches or manifests was cut from it; verify the run bundle it belongs to (agora orch audit %s writes it)",
			truncate(run, 40), truncate(run, 40))
		return
	}
	v.pass(CheckSelection, "", "signed by %s: %s", keyID(v.key), describeSelection(b))
}

// firstDifference returns the first line where signed and computed differ, each quoted.
func firstDifference(signed, computed string) (string, string) {
	a, b := strings.Split(signed, "\n"), strings.Split(computed, "\n")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return lineOrNothing(x), lineOrNothing(y)
		}
	}
	return "", ""
}

func lineOrNothing(s string) string {
	if s == "" {
		return "nothing"
	}
	return strconv.Quote(truncate(s, 120))
}

func describeSelection(b *Bundle) string {
	sel := b.Selection
	var s strings.Builder
	fmt.Fprintf(&s, "%d entries", sel.Count)
	if sel.Kind != "" {
		fmt.Fprintf(&s, " of kind %q", truncate(sel.Kind, 60))
	}
	if n := len(sel.Subjects); n == 1 {
		fmt.Fprintf(&s, " of subject %q", truncate(sel.Subjects[0], 60))
	} else if n > 1 {
		fmt.Fprintf(&s, " of %d subjects", n)
	}
	fmt.Fprintf(&s, " from index %d, below %d", sel.FromIndex, sel.EndIndex)
	if sel.Run != "" {
		fmt.Fprintf(&s, ", run %s", truncate(sel.Run, 40))
	}
	return s.String()
}
