package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
)

// openRecords reaps dispatches whose supervisor died, then returns the dispatcher.
func openRecords(ctx context.Context, f *Factory) (*dispatch.Dispatcher, error) {
	d, err := f.Dispatcher(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := d.Reap(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// openRecord reaps, then loads one dispatch record.
func openRecord(ctx context.Context, f *Factory, id string) (*dispatch.Dispatcher, *dispatch.Record, error) {
	d, err := openRecords(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	r, err := d.Records.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return d, r, nil
}

func newDispatchDescribeCmd(f *Factory) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe ID",
		Short: "Show a dispatch's record and events (works while it runs)",
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			_, r, err := openRecord(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			if output == formatJSON {
				return writeJSON(f.IO.Out, r)
			}
			w := f.IO.Out
			fmt.Fprintf(w, "id:        %s\n", r.ID)
			fmt.Fprintf(w, "state:     %s\n", r.State)
			if r.Reason != "" {
				fmt.Fprintf(w, "reason:    %s\n", r.Reason)
			}
			if r.Detail != "" {
				fmt.Fprintf(w, "detail:    %s\n", r.Detail)
			}
			if r.ExitCode != nil {
				fmt.Fprintf(w, "exit code: %d\n", *r.ExitCode)
			}
			fmt.Fprintf(w, "subagent:  %s@%s\n", r.Subagent, r.SubagentDigest)
			for _, e := range r.Envs {
				fmt.Fprintf(w, "env:       %s@%s\n", e.Name, e.Digest)
			}
			fmt.Fprintf(w, "target:    %s (sandbox %s, network %s, isolation %s)\n", r.Target, r.Sandbox, r.Network, orDash(r.Isolation))
			if r.Repo != "" {
				fmt.Fprintf(w, "repo:      %s@%s\n", r.Repo, r.Revision)
			}
			if r.ParentID != "" {
				fmt.Fprintf(w, "parent:    %s\n", r.ParentID)
			}
			fmt.Fprintf(w, "input:     %s\n", r.InputDigest)
			fmt.Fprintf(w, "timeout:   %s\n", time.Duration(r.Timeout))
			fmt.Fprintf(w, "actor:     %s\n", r.Actor)
			if g := r.Grants; g != nil {
				fmt.Fprintf(w, "grants:    tools %s; commands %s; egress %s\n", orNone(g.Tools), orNone(g.Commands), orNone(g.Egress))
			}
			if res := r.Result; res != nil {
				if res.Patch != nil {
					fmt.Fprintf(w, "patch:     %s (%d bytes)\n", res.Patch.Digest, res.Patch.Size)
				}
				for _, o := range res.Outputs {
					fmt.Fprintf(w, "output:    %s %s (%d bytes)\n", o.Path, o.Digest, o.Size)
				}
				if res.Transcript != nil {
					fmt.Fprintf(w, "transcript: %s (%d bytes)\n", res.Transcript.Digest, res.Transcript.Size)
				}
				if res.NeedsInput != nil {
					fmt.Fprintf(w, "question:  %s\n", res.NeedsInput.Question)
				}
			}
			fmt.Fprintf(w, "events:\n")
			for _, e := range r.Events {
				fmt.Fprintf(w, "  %s  %s\n", e.At.UTC().Format(time.RFC3339Nano), e.Kind)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newDispatchListCmd(f *Factory) *cobra.Command {
	var output, state string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--state S]",
		Short: "List dispatches, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			if err := dispatch.CheckState(state); err != nil {
				return usageErrorf(cmd, "--state: %v", err)
			}
			d, err := openRecords(cmd.Context(), f)
			if err != nil {
				return err
			}
			rs, err := d.Records.List(cmd.Context(), dispatch.ListFilter{State: state, Limit: limit})
			if err != nil {
				return err
			}
			if output == formatJSON {
				return writeJSON(f.IO.Out, rs)
			}
			rows := make([][]string, len(rs))
			for i, r := range rs {
				rows[i] = []string{r.ID, r.State, orDash(r.Reason), r.Subagent, r.Target, fmtTime(f.IO, f.Now(), r.CreatedAt)}
			}
			return printTable(f.IO, []string{"ID", "STATE", "REASON", "SUBAGENT", "TARGET", "CREATED"}, rows)
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only dispatches in this state")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many")
	addOutputFlag(cmd, &output)
	return cmd
}

func newDispatchLogsCmd(f *Factory) *cobra.Command {
	var follow, stderr, transcript bool
	cmd := &cobra.Command{
		Use:   "logs ID [-f]",
		Short: "Print a dispatch's output (capped, secrets redacted)",
		Long: `Print what the worker wrote to stdout (--stderr: to stderr). Output is capped (stdout
4 MiB, stderr 1 MiB) and every secret value of the dispatch's env bundles is redacted,
including its base64, hex and URL-encoded forms. -f follows a running dispatch to its end.
--transcript prints the model runtimes' JSON Lines transcript (openai, claude-code) of a
dispatch that ended, redacted the same way.`,
		Args: exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if transcript && (stderr || follow) {
				return usageErrorf(cmd, "--transcript cannot be used with --stderr or --follow")
			}
			ctx := cmd.Context()
			d, err := openRecords(ctx, f)
			if err != nil {
				return err
			}
			id := args[0]
			r, err := d.Records.Get(ctx, id)
			if err != nil {
				return err
			}
			if transcript {
				if r.Result == nil || r.Result.Transcript == nil {
					return fmt.Errorf("dispatch %s has no transcript (only the openai and claude-code runtimes keep one, once the dispatch ends)", id)
				}
				b, err := d.Blobs.Get(r.Result.Transcript.Digest, 0)
				if err != nil {
					return err
				}
				_, err = f.IO.Out.Write(b)
				return err
			}
			h, _ := f.Home(ctx)
			name := "stdout.log"
			if stderr {
				name = "stderr.log"
			}
			live := filepath.Join(h.Dir, home.DispatchDir, id, name)
			if dispatch.IsTerminal(r.State) {
				return printStoredLog(f, d, r, stderr, live)
			}
			return followLog(ctx, f, d, id, live, follow, stderr)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the dispatch ends")
	cmd.Flags().BoolVar(&stderr, "stderr", false, "print the worker's stderr instead of stdout")
	cmd.Flags().BoolVar(&transcript, "transcript", false, "print the model transcript instead of stdout")
	return cmd
}

func printStoredLog(f *Factory, d *dispatch.Dispatcher, r *dispatch.Record, stderr bool, live string) error {
	var a *dispatch.Artifact
	if r.Result != nil {
		a = r.Result.Stdout
		if stderr {
			a = r.Result.Stderr
		}
	}
	if a == nil {
		// Ended before the worker ran (denied, fetch-failed): there is no output.
		return nil
	}
	b, err := d.Blobs.Get(a.Digest, 0)
	if err != nil {
		return err
	}
	_, err = f.IO.Out.Write(b)
	return err
}

// followLog copies the live log file, and with follow keeps copying until the dispatch ends.
func followLog(ctx context.Context, f *Factory, d *dispatch.Dispatcher, id, path string, follow, stderr bool) error {
	var off int64
	for {
		if fh, err := os.Open(path); err == nil {
			fh.Seek(off, io.SeekStart)
			n, _ := io.Copy(f.IO.Out, fh)
			off += n
			fh.Close()
		}
		if !follow {
			return nil
		}
		r, err := d.Records.Get(ctx, id)
		if err != nil {
			return err
		}
		if dispatch.IsTerminal(r.State) {
			// The live file is complete once the record is terminal; copy its tail.
			if fh, err := os.Open(path); err == nil {
				fh.Seek(off, io.SeekStart)
				io.Copy(f.IO.Out, fh)
				fh.Close()
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func newDispatchPatchCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "patch ID",
		Short: "Print a dispatch's patch, ready for git apply",
		Long: `Print the patch the worker captured (git diff --binary against the workspace as it was
before the agent ran). It applies with 'git apply' on the dispatch's revision. Review it: the
agent wrote it.`,
		Args: exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, r, err := openRecord(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			if !dispatch.IsTerminal(r.State) {
				return fmt.Errorf("dispatch %s is still %s; its patch exists once it ends", r.ID, r.State)
			}
			if r.Result == nil || r.Result.Patch == nil {
				return fmt.Errorf("dispatch %s has no patch (%s)", r.ID, strings.Join(nonEmpty(r.State, r.Reason), ": "))
			}
			b, err := d.Blobs.Get(r.Result.Patch.Digest, 0)
			if err != nil {
				return err
			}
			_, err = f.IO.Out.Write(b)
			return err
		},
	}
}

func newDispatchOutputsCmd(f *Factory) *cobra.Command {
	var to string
	var output string
	cmd := &cobra.Command{
		Use:   "outputs ID --to DIR",
		Short: "Write a dispatch's output files into a directory",
		Long: `Write the files the agent left in outputs/ to DIR/<path>. Review them: the agent
wrote them.

Files are written 0600 (new directories 0700). Nothing already in DIR is followed or
overwritten: a symbolic link, or a different file, where an output goes is an error, and a
file with the same content is left as it is, so a rerun succeeds.`,
		Args: exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			d, r, err := openRecord(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			outs := []dispatch.Output{}
			if r.Result != nil {
				outs = r.Result.Outputs
			}
			if output == formatJSON && to == "" {
				return writeJSON(f.IO.Out, outs)
			}
			if to == "" {
				return usageErrorf(cmd, "--to DIR is required")
			}
			if len(outs) > 0 {
				dir, err := openOutDir(to)
				if err != nil {
					return err
				}
				defer dir.Close()
				for _, o := range outs {
					path, err := writeOutput(d, dir, o)
					if err != nil {
						return err
					}
					fmt.Fprintf(f.IO.ErrOut, "agora: wrote %s\n", path)
				}
			}
			if output == formatJSON {
				return writeJSON(f.IO.Out, outs)
			}
			if len(outs) == 0 {
				fmt.Fprintf(f.IO.ErrOut, "agora: dispatch %s has no outputs\n", r.ID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "directory to write the files into (created if needed)")
	addOutputFlag(cmd, &output)
	return cmd
}

// writeOutput writes one output below dir (see writeout.go: no link followed, nothing
// overwritten, 0600) and returns the path written. Output paths are the agent's: one that
// would leave dir is refused.
func writeOutput(d *dispatch.Dispatcher, dir *outDir, o dispatch.Output) (string, error) {
	b, err := d.Blobs.Get(o.Digest, 0)
	if err != nil {
		return "", err
	}
	return dir.writeFile(o.Path, b)
}

func newDispatchCancelCmd(f *Factory) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a running dispatch and everything it started (idempotent)",
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			d, err := openRecords(cmd.Context(), f)
			if err != nil {
				return err
			}
			r, err := d.Cancel(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if output == formatJSON {
				return writeJSON(f.IO.Out, r)
			}
			fmt.Fprintf(f.IO.Out, "%s %s\n", r.ID, r.State)
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newDispatchResumeCmd(f *Factory) *cobra.Command {
	var answer, output string
	var detach bool
	cmd := &cobra.Command{
		Use:   "resume ID --answer TEXT",
		Short: "Answer a dispatch that needs input, as a new linked dispatch",
		Long: `Start a new dispatch, linked to ID as its parent, with the same pinned subagent, env
bundles, target and revision. Its input is the parent's input plus "agora_resume":
{"question", "answer", "partial_state"}, so the agent can pick up where it stopped.`,
		Args: exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if answer == "" {
				return usageErrorf(cmd, "--answer is required")
			}
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			d, parent, err := openRecord(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			req, err := d.ResumeRequest(parent, answer, f.Actor())
			if err != nil {
				return err
			}
			return runDispatch(cmd, f, req, detach, output)
		},
	}
	cmd.Flags().StringVar(&answer, "answer", "", "the answer to the dispatch's question (required)")
	cmd.Flags().BoolVar(&detach, "detach", false, "return once the worker has started")
	addOutputFlag(cmd, &output)
	return cmd
}

// orNone quotes a grant list, or says it is empty.
func orNone(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	return quoteAll(items)
}
