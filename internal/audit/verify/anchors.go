package verify

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// maxReceiptInDetail caps how much of a command anchor's receipt a report repeats.
const maxReceiptInDetail = 120

func (v *verifier) checkEvidence(ev Evidence) {
	item := truncate(ev.Name, 120)
	if v.anc == nil {
		v.fail(CheckAnchor, item, "cannot check: the anchored checkpoint did not verify")
		return
	}
	sum := sha256.Sum256(v.b.Anchored.Checkpoint)
	if !bytes.Equal(ev.CheckpointSHA256, sum[:]) {
		v.fail(CheckAnchor, item, "evidence is for checkpoint sha256 %x, not the anchored one (%x)", ev.CheckpointSHA256, sum)
		return
	}
	switch ev.Type {
	case AnchorFile:
		v.pass(CheckAnchor, item, "checkpoint %d appended to a local file (%s); confirm the file still ends with or after it",
			v.anc.Size, orNone(ev.Locator))
	case AnchorRFC3161:
		roots, source, weak := v.opts.TSARoots, TSARootGiven, ""
		if roots == nil && len(ev.CACerts) > 0 {
			pool, err := CertPool(ev.CACerts)
			if err != nil {
				v.fail(CheckAnchor, item, "TSA CA certificate in the evidence: %v", err)
				return
			}
			roots, source, weak = pool, TSARootBundle, " (TSA root taken from the bundle: weaker, pass --tsa-ca)"
		}
		if roots == nil {
			pool, err := x509.SystemCertPool()
			if err != nil {
				v.fail(CheckAnchor, item, "no TSA root: the bundle has none and the system roots are unavailable: %v", err)
				return
			}
			roots, source, weak = pool, TSARootSystem, " (TSA root from the system trust store)"
		}
		at, err := CheckTimestamp(ev.Token, v.b.Anchored.Checkpoint, roots)
		if err != nil {
			v.fail(CheckAnchor, item, "%v", err)
			return
		}
		v.tiers[TierTrustedTime] = true
		if v.rep.TrustedTime == "" || at.Format(time.RFC3339) < v.rep.TrustedTime {
			v.rep.TrustedTime = at.Format(time.RFC3339)
		}
		// The tier rests on the strongest roots any token verified against.
		if v.rep.TSARoot == "" || tsaRootRank[source] < tsaRootRank[v.rep.TSARoot] {
			v.rep.TSARoot = source
		}
		v.pass(CheckAnchor, item, "RFC 3161 token: checkpoint %d existed at %s%s", v.anc.Size, at.Format(time.RFC3339), weak)
	case AnchorCommand:
		// No signature covers the evidence, and the receipt names a store this verifier
		// cannot reach: anyone can write this row, so it raises no tier. Tamper-evident needs
		// the auditor's own copy of the checkpoint from that store (checkAnchoredCopy).
		v.pass(CheckAnchor, item, "checkpoint %d handed to an external anchor with receipt %s: claimed, not verifiable offline, so it raises no tier; fetch the checkpoint from that store and pass it with --anchored-checkpoint",
			v.anc.Size, strconv.Quote(truncate(string(ev.Receipt), maxReceiptInDetail)))
	case AnchorS3:
		// Like a command's receipt, a claim until the bucket is asked: `agora verify
		// --anchor-bucket` fetches the object and its retention (checkAnchoredCopy).
		v.pass(CheckAnchor, item, "checkpoint %d written to an Object Lock object %s (%s): claimed until checked, so it raises no tier; pass --anchor-bucket to fetch it and its retention",
			v.anc.Size, strconv.Quote(truncate(ev.Locator, maxReceiptInDetail)), truncate(string(ev.Receipt), maxReceiptInDetail))
	default:
		v.fail(CheckAnchor, item, "unknown anchor type %q", truncate(ev.Type, 40))
	}
}

// checkAnchoredCopy compares the anchored checkpoint with the copies the auditor fetched from
// external anchors ([Options.AnchoredCopies]); only an exact match reaches tamper-evident. It
// runs only when copies were given, and a bundle with nothing to compare fails it.
func (v *verifier) checkAnchoredCopy() {
	copies := v.opts.AnchoredCopies
	switch {
	case len(copies) == 0:
		return
	case v.b.Anchored == nil:
		v.fail(CheckAnchoredCopy, "", "%d anchored checkpoint copies given, but the bundle carries no anchored checkpoint to compare them with", len(copies))
		return
	case v.anc == nil:
		v.fail(CheckAnchoredCopy, "", "cannot check: the anchored checkpoint did not verify")
		return
	}
	for _, c := range copies {
		if bytes.Equal(c, v.b.Anchored.Checkpoint) {
			v.tiers[TierTamperEvident] = true
			v.pass(CheckAnchoredCopy, "", "anchored checkpoint %d equals a copy the auditor supplied (fetched from an external anchor)", v.anc.Size)
			return
		}
	}
	sum := sha256.Sum256(v.b.Anchored.Checkpoint)
	v.fail(CheckAnchoredCopy, "", "none of the %d given copies is the bundle's anchored checkpoint (size %d, sha256 %x): the external anchor holds another checkpoint, or the copy is of another log",
		len(copies), v.anc.Size, sum)
}

// checkManifests checks that each manifest is recorded (as details.manifest) by an entry that
// passed its checks and, when the bundle promises manifests, that every recorded manifest is
// present. A bundle promises them when it carries any, and a part of a run bundle (its
// signed selection names a run) promises its dispatches' manifests even when it carries none:
// otherwise deleting all of them would leave no row to ask for them. A plain export carries
// none; its entries' details.manifest are digests only.
func (v *verifier) checkManifests() {
	have := map[string]bool{}
	for i, m := range v.b.Manifests {
		sum := sha256.Sum256(m.Manifest)
		ref := "sha256:" + hex.EncodeToString(sum[:])
		have[ref] = true
		item := strconv.Itoa(i)
		if idx, ok := v.refs[ref]; ok {
			v.pass(CheckManifest, item, "%s is recorded by entry %d", ref, idx)
			continue
		}
		v.fail(CheckManifest, item, "%s is not recorded by any verified entry of the bundle", ref)
	}
	if len(v.b.Manifests) == 0 && (v.b.Selection.Run == "" || len(v.refs) == 0) {
		return
	}
	var missing []string
	for ref := range v.refs {
		if !have[ref] {
			missing = append(missing, ref)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		v.fail(CheckManifest, "closure", "entry %d records manifest %s, which the bundle does not carry (%d missing)",
			v.refs[missing[0]], missing[0], len(missing))
		return
	}
	v.pass(CheckManifest, "closure", "every manifest the entries record is present")
}

func orNone(s string) string {
	if s == "" {
		return "no locator"
	}
	return fmt.Sprintf("%.200s", s)
}
