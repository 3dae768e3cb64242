package verify

import (
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// Check names, one per kind of row in a [Report]. They are stable: scripts and tests branch
// on them.
const (
	CheckBundle             = "bundle"
	CheckKey                = "key"
	CheckCheckpoint         = "checkpoint"
	CheckWitness            = "witness"
	CheckSelection          = "selection"
	CheckEntries            = "entries"
	CheckEntry              = "entry"
	CheckInclusion          = "inclusion"
	CheckAnchoredCheckpoint = "anchored checkpoint"
	CheckConsistency        = "consistency"
	CheckAnchorCoverage     = "anchor coverage"
	CheckAnchor             = "anchor"
	CheckManifest           = "manifest"
	CheckAnchoredCopy       = "anchored copy"
)

// Tiers name what a bundle that passes every check proves, weakest first.
const (
	// TierNone is reported when any check failed.
	TierNone = "none"
	// TierTamperDetecting: the entries are in a log whose checkpoints are signed by the
	// local key and held locally (the database, a file anchor). Whoever holds the key and
	// the storage could rewrite both.
	TierTamperDetecting = "tamper-detecting"
	// TierTrustedTime: in addition, an RFC 3161 timestamp authority attested that the
	// anchored checkpoint existed at a time ([Report.TSARoot] says which roots vouch for it).
	TierTrustedTime = "trusted-time"
	// TierTamperEvident: in addition, the anchored checkpoint is byte for byte a copy the
	// auditor fetched from an external anchor (e.g. object-lock storage) the log's operator
	// cannot silently rewrite ([Options.AnchoredCopies]). Evidence carried in the bundle
	// never reaches it: no signature covers `anchored`, and a command anchor's receipt cannot
	// be checked offline, so anyone could write one.
	TierTamperEvident = "tamper-evident"
)

// Key sources in a [Report].
const (
	KeyFromOptions = "given"
	KeyFromBundle  = "bundle"
)

// TSA root sources in a [Report], strongest first: the roots the auditor gave
// ([Options.TSARoots]), the system trust store, or CA certificates carried in the bundle's
// evidence (which whoever wrote the bundle chose).
const (
	TSARootGiven  = "given"
	TSARootSystem = "system"
	TSARootBundle = "bundle"
)

// Options configures [Verify].
type Options struct {
	// Key is the log's public verifier key as the auditor knows it (keys/audit.pub). It MUST
	// equal the bundle's key. Empty means the bundle's own key is used, which proves only
	// that the bundle is self-consistent.
	Key string
	// TSARoots are the trusted roots for RFC 3161 evidence. nil means the CA certificates
	// recorded in the evidence are used, which is weaker.
	TSARoots *x509.CertPool
	// AnchoredCopies are signed checkpoints the auditor fetched from external anchors
	// themselves (the bytes a command anchor uploaded). When set, a log's anchored checkpoint
	// must equal one of them byte for byte ([CheckAnchoredCopy]), and only then does the log
	// reach [TierTamperEvident]. The verifier trusts where they came from as it trusts Key.
	AnchoredCopies [][]byte
	// Witnesses, when it names keys, are the witnesses whose cosignatures the bundle's
	// checkpoint must carry ([CheckWitness]). Signatures by keys neither it nor Key names are
	// ignored either way (cosign.go).
	Witnesses Witnesses
}

// Result is one row of a [Report].
type Result struct {
	Check  string `json:"check"`
	Item   string `json:"item,omitempty"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Report is the outcome of [Verify]: one [Result] per check, in a fixed order.
type Report struct {
	// OK is true when every check passed.
	OK bool `json:"ok"`
	// Tier is the strongest tier reached, or [TierNone] when a check failed.
	Tier string `json:"tier"`
	// KeySource is [KeyFromOptions] or [KeyFromBundle].
	KeySource string `json:"key_source"`
	// TrustedTime is the time an RFC 3161 token attests, RFC 3339 UTC, when one verified.
	TrustedTime string `json:"trusted_time,omitempty"`
	// TSARoot says which roots the trusted time rests on when one verified: [TSARootGiven],
	// [TSARootSystem] or [TSARootBundle] (of a run, the weakest of its two logs').
	TSARoot string `json:"tsa_root,omitempty"`
	// Checks are the rows.
	Checks []Result `json:"checks"`
}

// Failed returns the failed rows.
func (r *Report) Failed() []Result {
	var out []Result
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

type verifier struct {
	b     *Bundle
	opts  Options
	rep   *Report
	key   note.Verifier
	cp    *Checkpoint // the bundle's checkpoint, when it verified
	anc   *Checkpoint // the anchored checkpoint, when it verified
	tiers map[string]bool
	// inRun is set when the bundle is checked as a part of a run bundle ([VerifyRun]).
	inRun bool
	refs  map[string]uint64 // details.manifest of passing entries -> entry index
	// entries are the decoded entries that passed their own checks, in bundle order; kept
	// only for a part of a run bundle (inRun), whose run checks read them.
	entries []EntryFields
	incl    *inclusionChecker // one per goroutine: it reuses its hash state
	lh      hash.Hash         // the leaf hashes' state, one per goroutine ([verifier.leafHash])
	// tree is the recomputed tree when the bundle holds all of the checkpoint's tree and
	// its leaves give the checkpoint's root; nil otherwise ([newFullTree]).
	tree *fullTree
	// entryFails counts the failed entry and inclusion rows; past maxEntryFailRows they are
	// counted, not kept ([verifier.fail]).
	entryFails int
	// stream is set when the bundle's entries are checked as they are read ([VerifyStream]):
	// they are not in b, and the rows that read them read its summaries.
	stream *streamState
}

// maxEntryFailRows is how many failed entry and inclusion rows one report lists (per
// goroutine of [verifier.checkEntries]); the rest are one summary row. A failed row holds its
// detail text, a few hundred bytes, so a bundle of many small failing entries would otherwise
// hold several times its size; the first thousand say what is wrong.
const maxEntryFailRows = 1000

// Verify checks b and returns a row per check. It never stops at the first failure: every
// check that can run does, and one that cannot (its input failed an earlier check) is
// reported as failed with the reason. Failed entry and inclusion rows are listed up to
// [maxEntryFailRows], then counted in one row. A part of a run bundle (its signed selection names a
// run) fails here: only [VerifyRun] checks that none of the run's dispatches was cut from it.
func Verify(b *Bundle, opts Options) *Report {
	v := newVerifier(b, opts)
	v.checkLog()
	v.rep.OK = len(v.rep.Failed()) == 0
	v.rep.Tier = TierNone
	if v.rep.OK {
		v.rep.Tier = tierOf(v)
	}
	return v.rep
}

func newVerifier(b *Bundle, opts Options) *verifier {
	return &verifier{b: b, opts: opts, rep: &Report{Checks: []Result{}}, tiers: map[string]bool{}, refs: map[string]uint64{}}
}

// checkLog runs every row of one log's bundle, in the order docs/audit-bundle.md gives.
func (v *verifier) checkLog() {
	v.checkKey()
	v.checkCheckpoint()
	v.checkSelection()
	v.checkEntries()
	v.checkAnchored()
	v.checkManifests()
	v.checkPurged()
	v.checkPurgedRuns()
}

func (v *verifier) pass(check, item, format string, args ...any) {
	v.rep.Checks = append(v.rep.Checks, Result{Check: check, Item: item, OK: true, Detail: fmt.Sprintf(format, args...)})
}

func (v *verifier) fail(check, item, format string, args ...any) {
	if check == CheckEntry || check == CheckInclusion {
		v.entryFails++
		if v.entryFails > maxEntryFailRows {
			return
		}
	}
	v.rep.Checks = append(v.rep.Checks, Result{Check: check, Item: item, OK: false, Detail: fmt.Sprintf(format, args...)})
}

func (v *verifier) checkKey() {
	text := strings.TrimSpace(v.b.Key)
	v.rep.KeySource = KeyFromBundle
	if v.opts.Key != "" {
		v.rep.KeySource = KeyFromOptions
		if given := strings.TrimSpace(v.opts.Key); given != text {
			v.fail(CheckKey, "", "bundle key %q is not the given key %q", truncate(text, 120), truncate(given, 120))
			return
		}
	}
	k, err := note.NewVerifier(text)
	if err != nil {
		v.fail(CheckKey, "", "bundle key %q is not a signed-note verifier key", truncate(text, 120))
		return
	}
	if !canonicalKey(v.b.Key, k) {
		v.fail(CheckKey, "", "bundle key %q is not in its canonical form (name+hash+base64: the hash as 8 lower-case hex digits, the key in padded standard base64, nothing around it): a bundle's bytes have one form", truncate(v.b.Key, 120))
		return
	}
	if !strings.HasPrefix(v.b.Origin, k.Name()+"/") {
		v.fail(CheckKey, "", "key %q does not belong to origin %q", k.Name(), truncate(v.b.Origin, 80))
		return
	}
	v.key = k
	if v.rep.KeySource == KeyFromBundle {
		v.pass(CheckKey, "", "%s, taken from the bundle (weaker: pass the operator's audit.pub with --key)", keyID(k))
		return
	}
	v.pass(CheckKey, "", "%s, matches the given key", keyID(k))
}

func (v *verifier) checkCheckpoint() {
	if v.key == nil {
		v.fail(CheckCheckpoint, "", "cannot check the signature: no usable key")
		if len(v.opts.Witnesses.Keys) > 0 {
			v.fail(CheckWitness, "", "cannot check: the checkpoint did not verify")
		}
		return
	}
	c, by, err := OpenCosignedCheckpoint(v.b.Checkpoint, v.key, v.b.Origin, v.opts.Witnesses)
	if err != nil {
		v.fail(CheckCheckpoint, "", "%v", err)
		if len(v.opts.Witnesses.Keys) > 0 {
			v.fail(CheckWitness, "", "cannot check: the checkpoint did not verify")
		}
		return
	}
	v.cp = &c
	v.pass(CheckCheckpoint, "", "signed by %s, size %d", keyID(v.key), c.Size)
	v.checkWitnesses(by)
}

// canonicalKey says whether text is k's verifier key in its one form: "name+hash+key", the
// hash as 8 lower-case hex digits and the key (its algorithm byte and bytes) in padded
// standard base64, with nothing before or after. note.NewVerifier also takes the hash in upper
// case and the base64 with stray low bits, so one key has several spellings; a bundle whose
// key was respelled would otherwise change bytes without verify noticing.
func canonicalKey(text string, k note.Verifier) bool {
	parts := strings.SplitN(text, "+", 3)
	if len(parts) != 3 || parts[0] != k.Name() || parts[1] != fmt.Sprintf("%08x", k.KeyHash()) {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	return err == nil && base64.StdEncoding.EncodeToString(raw) == parts[2]
}
