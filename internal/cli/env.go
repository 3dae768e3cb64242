package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
)

func newEnvCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Register and inspect env bundles (values and sealed secrets)",
		Long: `An env bundle is a set of plain values and sealed secrets handed to workers that name it.
Secrets are sealed at rest with AES-256-GCM under AGORA_HOME/keys/secret.key and are never
printed, logged or stored in plaintext; lists and shows give their keys only.`,
	}
	cmd.AddCommand(
		newEnvRegisterCmd(f, nil),
		newListCmd(f, nil, catalog.KindEnv, listColumns{
			headers: []string{"NAME", "DIGEST", "VALUES", "SECRETS", "REGISTERED"},
			row: func(f *Factory, v catalog.Version) []string {
				return []string{v.Name, fmtDigest(f.IO, v.Digest), orDash(strings.Join(v.Meta.ValueKeys, ",")),
					orDash(strings.Join(v.Meta.SecretKeys, ",")), fmtTime(f.IO, f.Now(), v.RegisteredAt)}
			},
		}),
		newShowCmd(f, nil, catalog.KindEnv, "Show an env bundle's values and secret keys (never secret values)", envShowRun),
		newHistoryCmd(f, nil, catalog.KindEnv),
	)
	return cmd
}

type envRegisterOptions struct {
	f    *Factory
	name string
	// values and secrets are the bundle, parsed from the flags and read from their sources.
	values  map[string]string
	secrets map[string][]byte

	valueFlags  []string
	secretFlags []string
	allow       []string
	output      string
}

func newEnvRegisterCmd(f *Factory, runF func(*envRegisterOptions) error) *cobra.Command {
	opts := &envRegisterOptions{f: f}
	cmd := &cobra.Command{
		Use:   "register NAME [--value K=V]... [--secret K=SOURCE]...",
		Short: "Register a new version of an env bundle",
		Long: `Register env bundle NAME with plain values and sealed secrets.

A secret's SOURCE says where to read it, never the value itself:
  K=env:VAR    from the environment variable VAR
  K=file:PATH  from a file (one trailing newline is dropped)
  K=-          from standard input (one trailing newline is dropped; at most one per command)

A literal value (--secret K=hunter2) is refused: a command line is visible to every process
on the machine. Plain values are scanned for credentials; a hit refuses the registration.`,
		Example: `  agora env register ci --value LOG_LEVEL=debug --secret GITHUB_TOKEN=env:GITHUB_TOKEN
  vault read -field=key secret/openai | agora env register openai --secret OPENAI_API_KEY=-`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, opts.output); err != nil {
				return err
			}
			opts.name = args[0]
			opts.values = map[string]string{}
			for _, kv := range opts.valueFlags {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageErrorf(cmd, "--value %q: want KEY=VALUE", kv)
				}
				if _, dup := opts.values[k]; dup {
					return usageErrorf(cmd, "--value %s given twice", k)
				}
				opts.values[k] = v
			}
			var err error
			if opts.secrets, err = readSecrets(cmd, f, opts.secretFlags); err != nil {
				return err
			}
			return runCmd(cmd, opts, runF, envRegisterRun)
		},
	}
	cmd.Flags().StringArrayVar(&opts.valueFlags, "value", nil, "a plain value KEY=VALUE; repeatable")
	cmd.Flags().StringArrayVar(&opts.secretFlags, "secret", nil, "a secret KEY=env:VAR, KEY=file:PATH or KEY=- (stdin); repeatable")
	cmd.Flags().StringSliceVar(&opts.allow, "allow-credential-pattern", nil, "credential scanner pattern to ignore in values (recorded on the version)")
	addOutputFlag(cmd, &opts.output)
	return cmd
}

func envRegisterRun(ctx context.Context, opts *envRegisterOptions) error {
	return registerRun(ctx, opts.f, opts.output, func(w *provision.Writer) (*provision.Pending, error) {
		return w.PrepareEnv(opts.name, opts.values, opts.secrets, splitList(opts.allow))
	})
}

// maxSecretInput caps what is read for one secret.
const maxSecretInput = 1 << 20

// literalSecretError refuses a secret value given on the command line. It names the key only.
type literalSecretError struct{ key string }

func (e *literalSecretError) Error() string {
	return fmt.Sprintf("--secret %s: refusing a secret value on the command line: argv is visible to every process on this machine", e.key)
}

func (e *literalSecretError) Hint() string {
	return fmt.Sprintf("pass --secret %s=env:VAR, --secret %s=file:PATH or --secret %s=- (standard input)", e.key, e.key, e.key)
}

func readSecrets(cmd *cobra.Command, f *Factory, specs []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	stdinUsed := false
	for _, s := range specs {
		k, src, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			// Do not echo s: it may be a secret typed without a key.
			return nil, usageErrorf(cmd, "--secret: want KEY=env:VAR, KEY=file:PATH or KEY=-")
		}
		if _, dup := out[k]; dup {
			return nil, usageErrorf(cmd, "--secret %s given twice", k)
		}
		var val []byte
		switch {
		case src == "-":
			if stdinUsed {
				return nil, usageErrorf(cmd, "--secret %s=-: standard input can supply only one secret", k)
			}
			stdinUsed = true
			b, err := io.ReadAll(io.LimitReader(f.IO.In, maxSecretInput+1))
			if err != nil {
				return nil, fmt.Errorf("--secret %s: read standard input: %w", k, err)
			}
			val = trimNewline(b)
		case strings.HasPrefix(src, "env:"):
			name := strings.TrimPrefix(src, "env:")
			v := f.Getenv(name)
			if v == "" {
				return nil, fmt.Errorf("--secret %s=env:%s: the environment variable %s is unset or empty", k, name, name)
			}
			val = []byte(v)
		case strings.HasPrefix(src, "file:"):
			path := strings.TrimPrefix(src, "file:")
			b, err := readLimited(path, maxSecretInput)
			if err != nil {
				return nil, fmt.Errorf("--secret %s=file:%s: %w", k, path, err)
			}
			val = trimNewline(b)
		default:
			return nil, &usageError{err: &literalSecretError{key: k}, cmd: cmd}
		}
		if len(val) > maxSecretInput {
			return nil, fmt.Errorf("--secret %s: over %d bytes", k, maxSecretInput)
		}
		out[k] = val
	}
	return out, nil
}

func trimNewline(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// envShow is the JSON shape of 'env show'. It never holds secret values.
type envShow struct {
	catalog.Version
	Values     map[string]string `json:"values"`
	SecretKeys []string          `json:"secret_keys"`
}

func envShowRun(ctx context.Context, opts *refOptions) error {
	_, v, data, err := resolveContent(ctx, opts)
	if err != nil {
		return err
	}
	doc, err := catalog.ParseEnvDoc(data)
	if err != nil {
		return err
	}
	out := envShow{Version: v, Values: doc.Values, SecretKeys: catalog.SortedKeys(doc.Secrets)}
	if out.Values == nil {
		out.Values = map[string]string{}
	}
	return emit(opts.f.IO, opts.output, out, func(out envShow) error {
		w := opts.f.IO.Out
		fmt.Fprintf(w, "name:       %s\n", v.Name)
		fmt.Fprintf(w, "digest:     %s\n", v.Digest)
		fmt.Fprintf(w, "registered: %s by %s\n", v.RegisteredAt.UTC().Format("2006-01-02T15:04:05Z"), v.RegisteredBy)
		fmt.Fprintf(w, "values:\n")
		for _, k := range catalog.SortedKeys(out.Values) {
			fmt.Fprintf(w, "  %s=%s\n", k, out.Values[k])
		}
		fmt.Fprintf(w, "secrets (sealed; values are never shown):\n")
		for _, k := range out.SecretKeys {
			fmt.Fprintf(w, "  %s\n", k)
		}
		return nil
	})
}
