// Package verify checks agora audit evidence with no database and no network: it owns the
// wire formats a third party needs (the C2SP tlog-checkpoint body, the signed checkpoint, the
// versioned audit bundle of docs/audit-bundle.md, anchor evidence) and the checks that
// `agora verify` runs over them.
//
// verify runs on the host side or on an auditor's machine. It MUST NOT import database or
// network code, nor agora's host packages (a test pins its imports), so the standalone
// verifier stays small and can be read in one sitting. Every input is untrusted: parsers are
// size-capped and strict, and every check that cannot run is reported as failed.
package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agora-dev/agora/internal/strictjson"
)

// Format is the version tag of the bundles agora writes: version 2 with a signed selection
// ([Bundle.SelectionNote]), [Selection.EndIndex] and [Selection.Run], subjects optional.
const Format = "agora-audit-bundle/v3"

// FormatV1 is the version tag of a range or kind bundle written before selections were
// signed. It still parses, but [Verify] fails its selection row: entries could have been
// removed from it without detection.
const FormatV1 = "agora-audit-bundle/v1"

// FormatV2 is [FormatV1] plus Selection.Subjects: a bundle by subject written before
// selections were signed. Like v1 it parses, and its selection row fails.
const FormatV2 = "agora-audit-bundle/v2"

// MaxBundleSize caps a bundle read by [ParseBundle]: about a million entries with proofs.
const MaxBundleSize = 1 << 30

// ErrBundle is matched (with [errors.Is]) by every bundle [ParseBundle] refuses.
var ErrBundle = errors.New("malformed audit bundle")

// Bundle is an exported slice of one audit log with everything needed to check it offline. All
// binary fields are base64 (standard alphabet, padded) in JSON. See docs/audit-bundle.md.
type Bundle struct {
	// Format is [Format].
	Format string `json:"format"`
	// Origin is the log's checkpoint origin, "agora/<instance-hex>/<log>".
	Origin string `json:"origin"`
	// Key is the log's public verifier key in signed-note form ("<name>+<hash>+<base64>").
	Key string `json:"key"`
	// Selection says which entries the exporter meant to include.
	Selection Selection `json:"selection"`
	// Checkpoint is the signed checkpoint every inclusion proof is against.
	Checkpoint []byte `json:"checkpoint"`
	// Anchored is the latest anchored checkpoint and its evidence; nil when none was anchored.
	Anchored *Anchored `json:"anchored"`
	// Manifests are dispatch manifests bound to entries (see [Manifest]); empty for a plain
	// range export.
	Manifests []Manifest `json:"manifests"`
	// SelectionNote is a C2SP signed note, by the log's key, over [SelectionText] of this
	// bundle: what the exporter selected and which entries that gave. Format v3 only.
	SelectionNote []byte `json:"selection_note,omitempty"`
	// Purged lists the products retention deleted, as the bundle's retention.purged entries
	// record them ([Purged]); absent when none did.
	Purged []Purged `json:"purged,omitempty"`
	// PurgedRuns lists the orchestrator runs retention removed from orch.db, as the bundle's
	// retention.run_purged entries record them ([PurgedRun]); absent when none did.
	PurgedRuns []PurgedRun `json:"purged_runs,omitempty"`
	// Entries are the selected entries in increasing index order. Last, so that a verifier
	// knows every other field when it reaches them and checks them as it reads them
	// ([VerifyStream]); the field order is the order [WriteBundle] writes.
	Entries []Entry `json:"entries"`
}

// Selection records the export's filter so the verifier can check the entries match it.
type Selection struct {
	// FromIndex is the first index the export considered.
	FromIndex uint64 `json:"from_index"`
	// EndIndex (format v3) is the size of the log's latest checkpoint at export: every entry
	// in [FromIndex, EndIndex) that matches Kind and Subjects is in the bundle.
	EndIndex uint64 `json:"end_index,omitempty"`
	// Kind, when set, is an exact kind ("catalog.register") or a prefix pattern ("catalog.*");
	// only matching entries were exported. When empty, the entries are contiguous.
	Kind string `json:"kind,omitempty"`
	// Count is the number of entries exported.
	Count int `json:"count"`
	// Subjects, when set (formats v2 and v3), keeps only entries whose subject is one of them
	// or lies below one ("run/R" also selects "run/R/task/T").
	Subjects []string `json:"subjects,omitempty"`
	// Run (format v3) names the orchestrator run a part of a run bundle belongs to; empty
	// for a plain export.
	Run string `json:"run,omitempty"`
}

// SubjectMatches reports whether subject is one of subjects or below one of them.
func SubjectMatches(subjects []string, subject string) bool {
	for _, s := range subjects {
		if subject == s || len(subject) > len(s) && subject[:len(s)] == s && subject[len(s)] == '/' {
			return true
		}
	}
	return false
}

// contiguous reports whether the selection promises every entry from FromIndex on.
func (s Selection) contiguous() bool { return s.Kind == "" && len(s.Subjects) == 0 }

// Entry is one log entry with its proof.
type Entry struct {
	// Index is the entry's leaf index (its sequence number).
	Index uint64 `json:"index"`
	// Entry is the canonical JSON (RFC 8785) exactly as hashed.
	Entry []byte `json:"entry"`
	// LeafHash is the RFC 6962 leaf hash, SHA-256(0x00 || Entry).
	LeafHash []byte `json:"leaf_hash"`
	// InclusionProof proves LeafHash at Index in the tree of [Bundle.Checkpoint].
	InclusionProof [][]byte `json:"inclusion_proof"`
}

// Anchored is a checkpoint that was handed to anchors, with what they returned.
type Anchored struct {
	// Checkpoint is the signed checkpoint the anchors hold.
	Checkpoint []byte `json:"checkpoint"`
	// ConsistencyProof is the RFC 6962 consistency proof between [Bundle.Checkpoint] and
	// Checkpoint, from the smaller tree to the larger (empty when the sizes are equal).
	ConsistencyProof [][]byte `json:"consistency_proof"`
	// Evidence is one record per anchor that accepted Checkpoint.
	Evidence []Evidence `json:"evidence"`
}

// Anchor types.
const (
	AnchorFile    = "file"
	AnchorRFC3161 = "rfc3161"
	AnchorCommand = "command"
	// AnchorS3 is an object under Object Lock in an S3 bucket; Locator is the object's
	// name under the bucket's prefix, Receipt its version and retention.
	AnchorS3 = "s3"
)

// Evidence is what one anchor returned for one checkpoint.
type Evidence struct {
	// Type is [AnchorFile], [AnchorRFC3161] or [AnchorCommand].
	Type string `json:"type"`
	// Name identifies the anchor: "file:/path", "rfc3161:https://host/path",
	// "command:/path/to/program".
	Name string `json:"name"`
	// At is when the anchor accepted the checkpoint, by the exporter's clock.
	At time.Time `json:"at"`
	// CheckpointSHA256 binds the evidence to the exact signed checkpoint bytes.
	CheckpointSHA256 []byte `json:"checkpoint_sha256"`
	// Locator says where to find the anchored copy (a file path and line), if anywhere.
	Locator string `json:"locator,omitempty"`
	// Token is an RFC 3161 TimeStampToken (DER) over the checkpoint bytes (rfc3161 only).
	Token []byte `json:"token,omitempty"`
	// CACerts are DER certificates from the anchor's ca_file (rfc3161 only): a hint for the
	// verifier, weaker than a CA it is given directly.
	CACerts [][]byte `json:"ca_certs,omitempty"`
	// Receipt is the anchor command's standard output (command only), e.g. an object version.
	Receipt []byte `json:"receipt,omitempty"`
}

// Manifest is a dispatch manifest carried in a bundle. Its SHA-256, written "sha256:<hex>",
// MUST be recorded as details.manifest of an entry in the same bundle.
type Manifest struct {
	// Manifest is the manifest's canonical bytes.
	Manifest []byte `json:"manifest"`
}

// ParseBundle reads one bundle from r: at most [MaxBundleSize] bytes of JSON with a known
// [Format], read so that it has one meaning for every reader (see [parseStrict]). It checks
// the shape only; [Verify] checks the contents. Errors match [ErrBundle].
func ParseBundle(r io.Reader) (*Bundle, error) {
	data, err := readLimited(r)
	if err != nil {
		return nil, err
	}
	return ParseBundleBytes(data)
}

// ParseBundleBytes is [ParseBundle] of a bundle already in memory. The bundle's entries are
// read in one pass by a scanner for the shape agora writes ([scanBundle]); a bundle it does
// not take is read again by [strictjson.Unmarshal], so every bundle has the same meaning and
// the same error as before. The parsed bundle does not keep data.
func ParseBundleBytes(data []byte) (*Bundle, error) {
	if len(data) > MaxBundleSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBundle, MaxBundleSize)
	}
	if err := checkDensity(data); err != nil {
		return nil, err
	}
	b, ok := scanBundle(data)
	if !ok {
		return parseBundleStrict(data)
	}
	return b.checkShape()
}

// parseBundleStrict is how [ParseBundle] read every bundle before [scanBundle]: the reference
// the scanner is fuzzed against.
func parseBundleStrict(data []byte) (*Bundle, error) {
	if err := checkDensity(data); err != nil {
		return nil, err
	}
	b := new(Bundle)
	if err := strictUnmarshalBundle(data, b); err != nil {
		return nil, err
	}
	return b.checkShape()
}

func strictUnmarshalBundle(data []byte, b *Bundle) error {
	if len(data) > MaxBundleSize {
		return fmt.Errorf("%w: larger than %d bytes", ErrBundle, MaxBundleSize)
	}
	if err := strictjson.Unmarshal(data, b); err != nil {
		return fmt.Errorf("%w: %v", ErrBundle, err)
	}
	return nil
}

func (b *Bundle) checkShape() (*Bundle, error) {
	if err := b.checkFormat(); err != nil {
		return nil, err
	}
	if b.Entries == nil || b.Manifests == nil {
		return nil, fmt.Errorf("%w: entries and manifests must be lists", ErrBundle)
	}
	return b, nil
}

// parseStrict reads at most [MaxBundleSize] bytes of r into v with [strictjson.Unmarshal]:
// every key exactly a field's name, at every level, no key twice (even in another case), no
// unknown field, nothing after the object. encoding/json alone would read "Dispatches" for
// "dispatches" and keep the last of two, so `agora verify` would check one part while jq and
// every other case-sensitive reader show another.
func parseStrict(r io.Reader, v any) error {
	data, err := readLimited(r)
	if err != nil {
		return err
	}
	if err := checkDensity(data); err != nil {
		return err
	}
	if err := strictjson.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBundle, err)
	}
	return nil
}

// Every object and list a parser keeps costs it a struct or a slice (an [Entry] is 80 bytes)
// however few bytes it took in the file: a bundle of empty entries ("{}", 3 bytes each) held
// ~117 times its size, and one of 33 MB, far under [MaxBundleSize], ran `agora verify` out of
// memory. An entry agora writes is hundreds of bytes (a 44-character leaf
// hash alone), so a document with more than one object or list per minBytesPerNode bytes,
// beyond a few for a bundle's frame, is refused before any of it is parsed.
const (
	minBytesPerNode = 64
	frameNodes      = 64
)

// checkDensity refuses data with more objects and lists than its size allows. It counts
// every '{' and '[' in the file, inside strings too (a bundle's strings are base64, hashes
// and names, which hold none), in two vectorised passes that cost no allocation.
func checkDensity(data []byte) error {
	nodes := bytes.Count(data, []byte{'{'}) + bytes.Count(data, []byte{'['})
	if nodes > len(data)/minBytesPerNode+frameNodes {
		return fmt.Errorf("%w: %d objects and lists in %d bytes, more than one per %d bytes, which no bundle agora writes holds (refused before parsing: reading it would take far more memory than the file)",
			ErrBundle, nodes, len(data), minBytesPerNode)
	}
	return nil
}

// readLimited reads at most [MaxBundleSize] bytes of r.
func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBundleSize+1))
	if err != nil {
		return nil, fmt.Errorf("read audit bundle: %w", err)
	}
	if len(data) > MaxBundleSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBundle, MaxBundleSize)
	}
	return data, nil
}

func (b *Bundle) checkFormat() error {
	legacy := b.Format == FormatV1 || b.Format == FormatV2
	switch {
	case b.Format == FormatV1 && len(b.Selection.Subjects) > 0:
		return fmt.Errorf("%w: a %s bundle cannot select subjects", ErrBundle, FormatV1)
	case b.Format == FormatV2 && len(b.Selection.Subjects) == 0:
		return fmt.Errorf("%w: a %s bundle must select subjects", ErrBundle, FormatV2)
	case legacy && (b.SelectionNote != nil || b.Selection.EndIndex != 0 || b.Selection.Run != ""):
		return fmt.Errorf("%w: a %s bundle cannot carry selection_note, selection.end_index or selection.run", ErrBundle, b.Format)
	case !legacy && b.Format != Format:
		return fmt.Errorf("%w: format %q, want %q (or the older %q or %q)", ErrBundle, truncate(b.Format, 40), Format, FormatV1, FormatV2)
	}
	return nil
}

// legacy reports whether b is of a format written before selections were signed.
func (b *Bundle) legacy() bool { return b.Format == FormatV1 || b.Format == FormatV2 }

// WriteBundle writes b as indented JSON.
func WriteBundle(w io.Writer, b *Bundle) error {
	if b.Entries == nil {
		b.Entries = []Entry{}
	}
	if b.Manifests == nil {
		b.Manifests = []Manifest{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	return enc.Encode(b)
}
