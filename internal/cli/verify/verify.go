// Package verify is `agora verify`: it checks an exported audit bundle with no database
// (internal/audit/verify does the checking) and, given the bucket, its Object Lock anchors in
// S3. It runs without a home: the bundle may come from another machine.
package verify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// largeBundle is the size from which verifyFileBounded bounds the heap by the bundle's size.
const largeBundle = 32 << 20

// maxKeyFileSize caps --key; a verifier key is under 100 bytes.
const maxKeyFileSize = 4 << 10

type verifyOptions struct {
	f        *cmdutil.Factory
	bundle   string
	key      string
	tsaCA    string
	anchored []string
	output   string

	// --witness and --witness-quorum: the witnesses whose cosignatures the checkpoint
	// must carry.
	witnesses     []string
	witnessQuorum int

	// --anchor-bucket and its connection: the S3 bucket an s3 anchor wrote to.
	anchorBucket, anchorEndpoint, anchorRegion, anchorCreds string
}

// verifyResult is the JSON shape of verify.
type verifyResult struct {
	Bundle string `json:"bundle"`
	*verify.Report
}

func NewCmd(f *cmdutil.Factory, runF func(*verifyOptions) error) *cobra.Command {
	opts := &verifyOptions{f: f}
	cmd := &cobra.Command{
		Use:   "verify BUNDLE [--key audit.pub] [--tsa-ca FILE] [--anchored-checkpoint FILE]...",
		Short: "Check an audit bundle offline and name every failed check",
		Long: `Check a bundle written by 'agora audit export' or 'agora orch audit' with no database and
no AGORA_HOME: every entry's hash and canonical form, every inclusion proof, the checkpoint
signatures, the signed selection (no entry removed or added, the filter unchanged), the
consistency proof to the anchored checkpoint, each anchor's evidence and each manifest's
binding to an entry. For a run bundle also: the run is sealed with all its entries present,
every attempt has its accepted entry, exactly one terminal entry and the manifest that entry
names, each dispatch manifest agrees with its entries (catalog hashes, input, products), and
every input of a task is the product of a succeeded task of the same run (provenance). One
row per check; exit 0 only when all pass, 5 when any fails. BUNDLE "-" reads the bundle from
standard input. A bundle over 64 MiB is checked as it is read, in memory that does not grow
with it: its passing entry and inclusion rows are one row each that counts them. A bundle of an older format carries no signed selection and fails: export
it again. One part of a run bundle fails on its own: verify the whole run bundle.

The last row names the tier reached:
  tamper-detecting  signed by the log's key, checkpoints held locally
  trusted-time      and an RFC 3161 token shows when the checkpoint existed
  tamper-evident    and the anchored checkpoint is the copy you fetched from an
                    external anchor (--anchored-checkpoint)

Pass the operator's public key (keys/audit.pub) with --key: without it the key is taken
from the bundle, which proves only that the bundle is self-consistent. --tsa-ca gives the
trusted roots for RFC 3161 tokens (default: the CA recorded in the bundle, weaker, else the
system roots). A command anchor's receipt in the bundle is a claim no one can check offline
and raises no tier: fetch the checkpoint it uploaded from that store yourself and pass the
file with --anchored-checkpoint (once per log; a run bundle has two). An s3 anchor's object
is fetched for you with --anchor-bucket s3://BUCKET/PREFIX --anchor-endpoint URL (credentials
from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or --anchor-credentials-file): each anchored
object must exist, equal the bundle's anchored checkpoint and be under COMPLIANCE retention;
its row says the version and the retain-until date.

A witness cosigns a log's checkpoint after checking it extends every checkpoint it cosigned
before (C2SP tlog-witness): a log owner cannot then show two auditors two histories.
Signatures on the checkpoint by keys you did not name are ignored (at most 16 in all).
--witness KEY (repeatable: a signed-note verifier key, name+hash+base64, or a file holding
one) requires that witness's cosignature on the bundle's checkpoint; --witness-quorum N
requires any N of the named ones (default: all). A forged cosignature by a named witness
fails the checkpoint row; a missing one fails the witness row.`,
		Example: `  agora verify audit.json --key audit.pub
  agora verify audit.json --key audit.pub --anchored-checkpoint checkpoint-from-s3
  agora verify audit.json --key audit.pub --anchor-bucket s3://team-audit/agora --anchor-endpoint https://s3.eu-west-1.amazonaws.com
  agora verify audit.json --key audit.pub --witness witness1.pub --witness witness2.pub --witness-quorum 1
  agora verify audit.json --output json`,
		Args: cmdutil.ExactArgs(1, "BUNDLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.bundle = args[0]
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, verifyRun)
		},
	}
	cmd.Flags().StringVar(&opts.key, "key", "", "the log's public verifier key file (keys/audit.pub)")
	cmd.Flags().StringVar(&opts.tsaCA, "tsa-ca", "", "PEM file of trusted roots for RFC 3161 tokens")
	cmd.Flags().StringArrayVar(&opts.anchored, "anchored-checkpoint", nil, "signed checkpoint file you fetched from an external anchor (repeatable)")
	cmd.Flags().StringVar(&opts.anchorBucket, "anchor-bucket", "", "s3://BUCKET/PREFIX an s3 anchor wrote to: fetch each anchored object and its Object Lock retention")
	cmd.Flags().StringVar(&opts.anchorEndpoint, "anchor-endpoint", "", "the S3 server of --anchor-bucket (https://HOST)")
	cmd.Flags().StringVar(&opts.anchorRegion, "anchor-region", "", "the signing region of --anchor-bucket (default us-east-1)")
	cmd.Flags().StringVar(&opts.anchorCreds, "anchor-credentials-file", "", "a mode-0600 file of AWS_ACCESS_KEY_ID=/AWS_SECRET_ACCESS_KEY= lines (default: those variables)")
	cmd.Flags().StringArrayVar(&opts.witnesses, "witness", nil, "a witness's verifier key (name+hash+base64) or a file holding one, whose cosignature the checkpoint must carry (repeatable)")
	cmd.Flags().IntVar(&opts.witnessQuorum, "witness-quorum", 0, "how many of the --witness keys must have cosigned (default: all)")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

// witnessKeys reads the --witness values: each a verifier key, or a file holding one.
func (opts *verifyOptions) witnessKeys() (verify.Witnesses, error) {
	w := verify.Witnesses{Quorum: opts.witnessQuorum}
	if opts.witnessQuorum < 0 || opts.witnessQuorum > len(opts.witnesses) {
		return w, fmt.Errorf("--witness-quorum %d: between 1 and the %d --witness keys given", opts.witnessQuorum, len(opts.witnesses))
	}
	for _, value := range opts.witnesses {
		k, err := verify.ParseWitnessKey(value)
		if err != nil && !strings.HasPrefix(value, "PRIVATE+KEY+") { // not a key: a file holding one
			b, rerr := cmdutil.ReadLimited(value, maxKeyFileSize)
			if rerr != nil {
				return w, fmt.Errorf("--witness: neither a verifier key (name+hash+base64) nor a file that reads: %w", rerr)
			}
			k, err = verify.ParseWitnessKey(string(b))
		}
		if err != nil {
			return w, fmt.Errorf("--witness: %w", err)
		}
		w.Keys = append(w.Keys, k)
	}
	return w, nil
}

// verifyRun never opens AGORA_HOME: the bundle and the files named by flags are all it reads,
// and with --anchor-bucket the objects that bucket holds.
func verifyRun(ctx context.Context, opts *verifyOptions) error {
	f := opts.f
	var vo verify.Options
	if opts.key != "" {
		b, err := cmdutil.ReadLimited(opts.key, maxKeyFileSize)
		if err != nil {
			return fmt.Errorf("read --key: %w", err)
		}
		vo.Key = strings.TrimSpace(string(b))
	}
	if opts.tsaCA != "" {
		b, err := cmdutil.ReadLimited(opts.tsaCA, cmdutil.MaxCAFileSize)
		if err != nil {
			return fmt.Errorf("read --tsa-ca: %w", err)
		}
		vo.TSARoots = x509.NewCertPool()
		if !vo.TSARoots.AppendCertsFromPEM(b) {
			return fmt.Errorf("--tsa-ca %s holds no PEM certificate", opts.tsaCA)
		}
	}
	w, err := opts.witnessKeys()
	if err != nil {
		return err
	}
	vo.Witnesses = w
	for _, path := range opts.anchored {
		b, err := cmdutil.ReadLimited(path, verify.MaxCheckpointSize)
		if err != nil {
			return fmt.Errorf("read --anchored-checkpoint: %w", err)
		}
		vo.AnchoredCopies = append(vo.AnchoredCopies, b)
	}
	in, path := f.IO.In, opts.bundle
	var s3Rows []verify.Result
	if opts.anchorBucket != "" {
		c, err := opts.anchorBucketClient()
		if err != nil {
			return err
		}
		data, err := readBundle(f.IO.In, opts.bundle)
		if err != nil {
			return err
		}
		var copies [][]byte
		copies, s3Rows = s3AnchorCopies(ctx, c, data)
		vo.AnchoredCopies = append(vo.AnchoredCopies, copies...)
		in, path = bytes.NewReader(data), "-"
	}
	// The heap's bounds hold through the report's printing too: restored before it, they
	// started a collection of the whole check's garbage only to print.
	rep, restore, err := verifyFileBounded(ctx, in, path, vo)
	defer restore()
	if err != nil {
		return err
	}
	for _, r := range s3Rows {
		rep.Checks = append(rep.Checks, r)
		if !r.OK {
			rep.OK, rep.Tier = false, verify.TierNone
		}
	}
	if opts.output == cmdutil.FormatJSON {
		if err := cmdutil.WriteJSON(f.IO.Out, verifyResult{Bundle: opts.bundle, Report: rep}); err != nil {
			return err
		}
	} else if err := printReport(f, rep); err != nil {
		return err
	}
	if failed := rep.Failed(); len(failed) > 0 {
		first := failed[0]
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitCheckFailed, Err: fmt.Errorf("%d of %d checks failed; first: %s: %s",
			len(failed), len(rep.Checks), strings.TrimSpace(first.Check+" "+first.Item), first.Detail)}
	}
	return nil
}

// streamFrom is the bundle size from which verify streams it. Below it, reading the whole
// bundle costs at most a few times 64 MiB and lists every entry's rows; above it, holding
// the bundle would grow with it without bound. A variable so that a test can stream a small
// bundle.
var streamFrom int64 = 64 << 20

// verifyFileBounded reads and checks a bundle ("-" is stdin). A bundle that does not parse is a
// failed check (it may have been tampered with), reported as the one row "bundle"; a file
// that cannot be read is an error. A bundle of at most streamFrom bytes is read once into
// memory and parsed in one pass (verify.ParseBundleBytes); a run bundle, which that refuses,
// is parsed as one. A larger bundle is checked as it is read (verify.VerifyStream), in memory
// that does not grow with it. The heap's bounds it sets for a large bundle stay in place
// until restore is called.
func verifyFileBounded(ctx context.Context, stdin io.Reader, path string, vo verify.Options) (rep *verify.Report, restore func(), err error) {
	restore = func() {}
	data, file, size, err := openBundle(stdin, path)
	if err != nil {
		return nil, restore, err
	}
	if file != nil {
		defer file.Close()
		rep, err := verify.VerifyStream(ctx, file, size, vo)
		switch {
		case err == nil:
			return rep, restore, nil
		case errors.Is(err, verify.ErrRunBundle):
			// A run bundle is read whole, as ParseRunBundle reads it, up to its limit.
			if data, err = readAllLimited(io.NewSectionReader(file, 0, size)); err != nil {
				return nil, restore, err
			}
		case errors.Is(err, verify.ErrBundle):
			return bundleFailed(err), restore, nil
		default:
			return nil, restore, err
		}
	}
	// The bundle in memory, its parsed form and the report are all live at the peak; the
	// collector keeps the garbage of checking 100,000 entries around them below about
	// twice the file instead of twice the peak (memory under 3x the file). Only
	// for a large bundle: the limit is the process's, and a small one needs none.
	if len(data) >= largeBundle {
		limit := 2*int64(len(data)) + 64<<20
		prevLimit := debug.SetMemoryLimit(limit)
		// Where that limit is itself under 3x the file (from 64 MB), it alone paces the
		// collector: proportional collection (GOGC) only added cycles that each marked the
		// parsed bundle's 1.7 million proof slices again, four collections where the limit
		// needs two, a sixth of the verify's CPU.
		prevPercent := -2
		if limit <= 3*int64(len(data)) {
			prevPercent = debug.SetGCPercent(-1)
		}
		restore = func() {
			if prevPercent != -2 {
				debug.SetGCPercent(prevPercent)
			}
			debug.SetMemoryLimit(prevLimit)
		}
	}
	b, err := verify.ParseBundleBytes(data)
	if err == nil {
		data = nil // the parsed bundle does not keep it: let it go while verifying
		return verify.Verify(b, vo), restore, nil
	}
	if errors.Is(err, verify.ErrBundle) && verify.IsRunBundle(data) {
		rb, err := verify.ParseRunBundle(bytes.NewReader(data))
		if errors.Is(err, verify.ErrBundle) {
			return bundleFailed(err), restore, nil
		}
		if err != nil {
			return nil, restore, err
		}
		return verify.VerifyRun(rb, vo), restore, nil
	}
	if errors.Is(err, verify.ErrBundle) {
		return bundleFailed(err), restore, nil
	}
	return nil, restore, err
}

func bundleFailed(err error) *verify.Report {
	return &verify.Report{OK: false, Tier: verify.TierNone, KeySource: verify.KeyFromBundle,
		Checks: []verify.Result{{Check: verify.CheckBundle, Detail: err.Error()}}}
}

// stdinSpoolCap bounds the copy of standard input openBundle makes: an input that never ends
// (a stream piped from elsewhere) must not fill TMPDIR. 64 GiB holds a bundle of some 40
// million entries; a larger one is verified from its path, which needs no copy. A variable
// only so the package's tests can lower it.
var stdinSpoolCap int64 = 64 << 30

// openBundle opens the bundle at path ("-" is stdin): a file of more than streamFrom bytes to
// stream, or the bundle's bytes. Standard input of more than streamFrom bytes is copied to an
// unlinked temporary file: the stream reads a bundle whose entries are not its last field
// twice, by offset.
func openBundle(stdin io.Reader, path string) (data []byte, file *os.File, size int64, err error) {
	if path != "-" {
		fd, err := os.Open(path)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("read bundle: %w", err)
		}
		if st, err := fd.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > streamFrom {
			return nil, fd, st.Size(), nil
		}
		fd.Close()
		data, err := readBundle(stdin, path)
		return data, nil, 0, err
	}
	head, err := io.ReadAll(io.LimitReader(stdin, streamFrom+1))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read bundle: %w", err)
	}
	if int64(len(head)) <= streamFrom {
		return head, nil, 0, nil
	}
	spool, err := os.CreateTemp("", "agora-verify-*.json")
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read bundle from standard input: a bundle over %d bytes is checked from a file, and no temporary file could be made (set TMPDIR, or pass the bundle's path): %w", streamFrom, err)
	}
	os.Remove(spool.Name()) // unlinked: gone when closed, whatever happens
	n, err := io.Copy(spool, io.LimitReader(io.MultiReader(bytes.NewReader(head), stdin), stdinSpoolCap+1))
	if err == nil && n > stdinSpoolCap {
		err = fmt.Errorf("it went on past %d bytes", stdinSpoolCap)
	}
	if err != nil {
		spool.Close()
		return nil, nil, 0, fmt.Errorf("read bundle from standard input into a temporary file (a bundle over %d bytes is checked from a file; pass its path to avoid the copy): %w", streamFrom, err)
	}
	return nil, spool, n, nil
}

// readAllLimited reads r whole, refusing more than verify.MaxBundleSize bytes.
func readAllLimited(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, verify.MaxBundleSize+1))
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	if len(b) > verify.MaxBundleSize {
		return nil, fmt.Errorf("read run bundle: larger than %d bytes, the limit of a run bundle, which is read whole", verify.MaxBundleSize)
	}
	return b, nil
}

// readBundle reads at most verify.MaxBundleSize+1 bytes of the file at path ("-" is stdin),
// into one buffer of the file's size when it has one, so a large bundle is not copied as it
// grows.
func readBundle(stdin io.Reader, path string) ([]byte, error) {
	r, size := stdin, int64(0)
	var file *os.File
	if path != "-" {
		fd, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read bundle: %w", err)
		}
		defer fd.Close()
		if st, err := fd.Stat(); err == nil && st.Mode().IsRegular() {
			size = min(st.Size(), verify.MaxBundleSize+1)
		}
		r, file = fd, fd
	}
	if size == 0 {
		// A stream of unknown size: append's growth (about 1.25x for large slices), not a
		// buffer's doubling, so a stream refused as too large holds about 2x the cap at its
		// peak, not 4x.
		b, err := io.ReadAll(io.LimitReader(r, verify.MaxBundleSize+1))
		if err != nil {
			return nil, fmt.Errorf("read bundle: %w", err)
		}
		return b, nil
	}
	if size >= parallelReadFrom && size <= verify.MaxBundleSize {
		if b, ok := readAtOnEveryCPU(file, size); ok {
			return b, nil
		}
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("read bundle: %w", err)
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(r, verify.MaxBundleSize+1)); err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	return buf.Bytes(), nil
}

// parallelReadFrom is the file size from which readBundle reads a bundle on every CPU. A
// variable so that a test can read a small bundle the same way (16 MB bundles verified
// dozens of times took minutes under -race).
var parallelReadFrom int64 = 16 << 20

// readAtOnEveryCPU reads the size bytes of f in equal runs, one per CPU, into one buffer: the
// copy and the page faults of a fresh 131 MB buffer were a tenth of a 100,000-entry verify's
// time, all of it before the parse could start. It reports false when the file
// is no longer size bytes (it shrank, or holds a byte beyond), and the caller reads it again
// from its start as a stream.
func readAtOnEveryCPU(f *os.File, size int64) ([]byte, bool) {
	buf := make([]byte, size+1) // the last byte: whether the file grew
	// Huge pages where the kernel offers them on request (transparent_hugepage=madvise): the
	// fresh buffer is then faulted in 2 MB at a time, not 4 KB. Only a hint: an error changes
	// nothing.
	if len(buf) >= 2<<20 {
		_ = unix.Madvise(buf, unix.MADV_HUGEPAGE)
	}
	workers := int64(runtime.GOMAXPROCS(0))
	chunk := (size + workers - 1) / workers
	var failed atomic.Bool
	var wg sync.WaitGroup
	for off := int64(0); off < size; off += chunk {
		wg.Go(func() {
			if _, err := f.ReadAt(buf[off:min(off+chunk, size)], off); err != nil {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return nil, false
	}
	if n, _ := f.ReadAt(buf[size:], size); n != 0 {
		return nil, false
	}
	return buf[:size], true
}

var tierText = map[string]string{
	verify.TierNone:            "a check failed: the bundle proves nothing",
	verify.TierTamperDetecting: "signed by the log's key, checkpoints held locally",
	verify.TierTrustedTime:     "and an RFC 3161 token shows when the checkpoint existed",
	verify.TierTamperEvident:   "and the anchored checkpoint is the copy you fetched from an external anchor",
}

// tsaRootText qualifies the trusted-time tier by the roots its token chained to.
var tsaRootText = map[string]string{
	verify.TSARootBundle: " (TSA root taken from the bundle, which its writer chose: pass --tsa-ca with your TSA's CA)",
	verify.TSARootSystem: " (TSA root from the system trust store: pass --tsa-ca to trust only your TSA's CA)",
}

func printReport(f *cmdutil.Factory, rep *verify.Report) error {
	tier := tierText[rep.Tier]
	if rep.Tier == verify.TierTrustedTime {
		tier += tsaRootText[rep.TSARoot]
	}
	if rep.OK && rep.KeySource == verify.KeyFromBundle {
		tier += " (key taken from the bundle: pass --key to tie it to the operator)"
	}
	if !f.IO.OutTTY {
		// What printTable writes off a terminal, a row at a time: a 100,000-entry bundle
		// has 200,000 rows, and building them as a table first cost a tenth of the verify.
		w := bufio.NewWriter(f.IO.Out)
		w.WriteString("CHECK\tRESULT\tDETAIL\n")
		for _, c := range rep.Checks {
			writeCheckName(w, c)
			w.WriteString("\t" + passOrFail(c.OK) + "\t")
			w.WriteString(c.Detail)
			w.WriteByte('\n')
		}
		w.WriteString("tier\t" + rep.Tier + "\t" + tier + "\n")
		return w.Flush()
	}
	rows := make([][]string, 0, len(rep.Checks)+1)
	for _, c := range rep.Checks {
		rows = append(rows, []string{checkName(c), passOrFail(c.OK), c.Detail})
	}
	rows = append(rows, []string{"tier", rep.Tier, tier})
	return cmdutil.PrintTable(f.IO, []string{"CHECK", "RESULT", "DETAIL"}, rows)
}

// writeCheckName writes checkName(c) without building it when no space is to be trimmed
// (every row agora writes): 200,000 strings were the garbage that started a collection
// while a 100,000-entry bundle's report was printed.
func writeCheckName(w *bufio.Writer, c verify.Result) {
	first, _ := utf8.DecodeRuneInString(c.Check)
	last, _ := utf8.DecodeLastRuneInString(c.Item)
	if c.Check == "" || c.Item == "" || unicode.IsSpace(first) || unicode.IsSpace(last) {
		w.WriteString(checkName(c))
		return
	}
	w.WriteString(c.Check)
	w.WriteByte(' ')
	w.WriteString(c.Item)
}

func checkName(c verify.Result) string {
	if c.Item == "" {
		return strings.TrimSpace(c.Check)
	}
	return strings.TrimSpace(c.Check + " " + c.Item)
}

func passOrFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}
