// Package env is `agora env`: register, list, show and retire env bundles, the values and
// sealed secrets a dispatch may be given, with the hosts and headers each secret is bound to.
package env

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/cli/catalogcmd"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/errclass"
)

func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Register and inspect env bundles (values and sealed secrets)",
		Long: `An env bundle is a set of plain values and sealed secrets handed to workers that name it.
Secrets are sealed at rest with AES-256-GCM under AGORA_HOME/keys/secret.key and are never
printed, logged or stored in plaintext; lists and shows give their keys only.`,
	}
	cmd.AddCommand(
		newEnvRegisterCmd(f, nil),
		catalogcmd.NewListCmd(f, nil, catalog.KindEnv, catalogcmd.ListColumns{
			Headers: []string{"NAME", "DIGEST", "VALUES", "SECRETS", "REGISTERED"},
			Row: func(f *cmdutil.Factory, v catalog.Version) []string {
				return []string{v.Name, cmdutil.FmtDigest(f.IO, v.Digest), cmdutil.OrDash(strings.Join(v.Meta.ValueKeys, ",")),
					cmdutil.OrDash(strings.Join(v.Meta.SecretKeys, ",")), cmdutil.FmtTime(f.IO, f.Now(), v.RegisteredAt)}
			},
		}),
		catalogcmd.NewShowCmd(f, nil, catalog.KindEnv, "Show an env bundle's values and secret keys (never secret values)", envShowRun),
		catalogcmd.NewHistoryCmd(f, nil, catalog.KindEnv),
	)
	return cmd
}

type envRegisterOptions struct {
	f    *cmdutil.Factory
	name string
	// values, secrets and bindings are the bundle, parsed from the flags and read from their
	// sources.
	values   map[string]string
	secrets  map[string][]byte
	bindings map[string]catalog.Binding

	valueFlags      []string
	secretFlags     []string
	bindHostFlags   []string
	bindHeaderFlags []string
	allow           []string
	output          string
}

func newEnvRegisterCmd(f *cmdutil.Factory, runF func(*envRegisterOptions) error) *cobra.Command {
	opts := &envRegisterOptions{f: f}
	cmd := &cobra.Command{
		Use:   "register NAME [--value K=V]... [--secret K=SOURCE]... [--bind-host K=HOST,...]...",
		Short: "Register a new version of an env bundle",
		Long: `Register env bundle NAME with plain values and sealed secrets.

A secret's SOURCE says where to read it, never the value itself:
  K=env:VAR    from the environment variable VAR
  K=file:PATH  from a file (one trailing newline is dropped)
  K=-          from standard input (one trailing newline is dropped; at most one per command)

A literal value (--secret K=hunter2) is refused: a command line is visible to every process
on the machine. Plain values are scanned for credentials; a hit refuses the registration.

Binding a secret to hosts keeps its value out of the sandbox altogether:
  --bind-host K=HOST,HOST     the hosts the secret may be sent to (repeatable)
  --bind-header K=HEADER,...  headers to put it in besides Authorization (X-Api-Key, say)

The sandbox then sees only a placeholder (agora-placeholder-...) in K, never the value.
agora's egress proxy, outside the sandbox, swaps the placeholder for the value in HTTPS
requests to those hosts only: in the Authorization header (a bearer token, or basic-auth
user:password) and in the named headers. The value goes only inside TLS the proxy
terminates and re-encrypts, on port 443 unless the HOST names another
(api.example.com:8443, [2001:db8::1]:8443); never over plain HTTP. A request carrying the
placeholder to any other host or port, or over plain HTTP, is refused, so an agent cannot
send the secret anywhere else. A HOST is a lowercase name (api.github.com), *.example.com
for its subdomains, or an IP address, and an optional :PORT; no scheme or path. A binding
opens no network: the subagent's capabilities must still grant egress to the host. With exactly one --secret, K= may be left out of --bind-host and --bind-header.
Registering the same bindings again changes nothing; other bindings make a new version.`,
		Example: `  agora env register ci --value LOG_LEVEL=debug --secret GITHUB_TOKEN=env:GITHUB_TOKEN
  vault read -field=key secret/openai | agora env register openai --secret OPENAI_API_KEY=-
  agora env register gh --secret GITHUB_TOKEN=env:GH --bind-host GITHUB_TOKEN=api.github.com,github.com
  agora env register search --secret API_KEY=file:key.txt --bind-host api.example.com --bind-header X-Api-Key`,
		Args: cmdutil.ExactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			opts.name = args[0]
			if err := opts.parseFlags(cmd); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, envRegisterRun)
		},
	}
	cmd.Flags().StringArrayVar(&opts.valueFlags, "value", nil, "a plain value KEY=VALUE; repeatable")
	cmd.Flags().StringArrayVar(&opts.secretFlags, "secret", nil, "a secret KEY=env:VAR, KEY=file:PATH or KEY=- (stdin); repeatable")
	cmd.Flags().StringArrayVar(&opts.bindHostFlags, "bind-host", nil, "bind secret KEY to hosts, KEY=HOST[:PORT],...: the sandbox gets a placeholder, the proxy sends the value over HTTPS to those hosts only (port 443 unless named); repeatable")
	cmd.Flags().StringArrayVar(&opts.bindHeaderFlags, "bind-header", nil, "KEY=HEADER,HEADER: headers to swap bound secret KEY into besides Authorization; repeatable")
	cmd.Flags().StringSliceVar(&opts.allow, "allow-credential-pattern", nil, "credential scanner pattern to ignore in values (recorded on the version)")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

// parseFlags fills values, bindings and secrets from the flags. Bindings are checked before
// any secret is read: a wrong command line is refused before it consumes standard input.
func (opts *envRegisterOptions) parseFlags(cmd *cobra.Command) error {
	opts.values = map[string]string{}
	for _, kv := range opts.valueFlags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cmdutil.UsageErrorf(cmd, "--value %q: want KEY=VALUE", kv)
		}
		if _, dup := opts.values[k]; dup {
			return cmdutil.UsageErrorf(cmd, "--value %s given twice", k)
		}
		opts.values[k] = v
	}
	var secretKeys []string
	for _, s := range opts.secretFlags {
		if k, _, ok := strings.Cut(s, "="); ok && k != "" && !slices.Contains(secretKeys, k) {
			secretKeys = append(secretKeys, k)
		}
	}
	slices.Sort(secretKeys)
	var err error
	if opts.bindings, err = parseBindings(cmd, opts.bindHostFlags, opts.bindHeaderFlags, secretKeys, opts.values); err != nil {
		return err
	}
	opts.secrets, err = readSecrets(cmd, opts.f, opts.secretFlags)
	return err
}

// parseBindings reads --bind-host and --bind-header into bindings, refusing a key that is not
// one of secretKeys (the command's --secret keys), an invalid host or header, and headers for
// a key no --bind-host binds.
func parseBindings(cmd *cobra.Command, hostFlags, headerFlags, secretKeys []string, values map[string]string) (map[string]catalog.Binding, error) {
	out := map[string]catalog.Binding{}
	for _, arg := range hostFlags {
		k, hosts, err := bindArg(cmd, "--bind-host", arg, secretKeys, values)
		if err != nil {
			return nil, err
		}
		for _, h := range hosts {
			if err := catalog.CheckBindingHost(h); err != nil {
				return nil, cmdutil.UsageErrorf(cmd, "--bind-host %s: %v", k, err)
			}
		}
		b := out[k]
		b.Hosts = append(b.Hosts, hosts...)
		out[k] = b
	}
	for _, arg := range headerFlags {
		k, headers, err := bindArg(cmd, "--bind-header", arg, secretKeys, values)
		if err != nil {
			return nil, err
		}
		b, ok := out[k]
		if !ok {
			return nil, cmdutil.UsageErrorf(cmd, "--bind-header %s: %s is bound to no host; add --bind-host %s=HOST first (the headers say where to put a bound secret)", k, k, k)
		}
		for _, h := range headers {
			h = catalog.CanonicalHeader(h)
			if err := catalog.CheckBindingHeader(h); err != nil {
				return nil, cmdutil.UsageErrorf(cmd, "--bind-header %s: %v", k, err)
			}
			b.Headers = append(b.Headers, h)
		}
		out[k] = b
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// bindArg splits a --bind-host or --bind-header argument, KEY=A,B or (with exactly one
// --secret) A,B, into the secret's key and the items. Host and header names never hold '=',
// so the first one separates the key.
func bindArg(cmd *cobra.Command, flag, arg string, secretKeys []string, values map[string]string) (string, []string, error) {
	k, list, named := strings.Cut(arg, "=")
	if !named && slices.Contains(secretKeys, arg) {
		return "", nil, cmdutil.UsageErrorf(cmd, "%s %s: nothing to bind it to; want %s %s=A,B", flag, arg, flag, arg)
	}
	if !named {
		if len(secretKeys) != 1 {
			return "", nil, cmdutil.UsageErrorf(cmd, "%s %s: name the secret, as %s KEY=%s; KEY= may be left out only with exactly one --secret (this command has %d)",
				flag, arg, flag, arg, len(secretKeys))
		}
		k, list = secretKeys[0], arg
	}
	if !slices.Contains(secretKeys, k) {
		if _, isValue := values[k]; isValue {
			return "", nil, cmdutil.UsageErrorf(cmd, "%s %s: %s is a --value, not a --secret; only a secret can be bound (secrets: %s)", flag, k, k, keyList(secretKeys))
		}
		return "", nil, cmdutil.UsageErrorf(cmd, "%s %s: %s is not a --secret of this command (secrets: %s)", flag, k, k, keyList(secretKeys))
	}
	var items []string
	for item := range strings.SplitSeq(list, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	if len(items) == 0 {
		return "", nil, cmdutil.UsageErrorf(cmd, "%s %s: nothing after %s=; want %s %s=A,B", flag, k, k, flag, k)
	}
	return k, items, nil
}

// keyList lists keys for a message, or says there are none.
func keyList(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

func envRegisterRun(ctx context.Context, opts *envRegisterOptions) error {
	return catalogcmd.RegisterRun(ctx, opts.f, opts.output, func(w *provision.Writer) (*provision.Pending, error) {
		spec := provision.EnvSpec{Values: opts.values, Secrets: opts.secrets, Bindings: opts.bindings}
		return w.PrepareEnvSpec(opts.name, spec, cmdutil.SplitList(opts.allow))
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

func readSecrets(cmd *cobra.Command, f *cmdutil.Factory, specs []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	stdinUsed := false
	for _, s := range specs {
		k, src, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			// Do not echo s: it may be a secret typed without a key.
			return nil, cmdutil.UsageErrorf(cmd, "--secret: want KEY=env:VAR, KEY=file:PATH or KEY=-")
		}
		if _, dup := out[k]; dup {
			return nil, cmdutil.UsageErrorf(cmd, "--secret %s given twice", k)
		}
		var val []byte
		switch {
		case src == "-":
			if stdinUsed {
				return nil, cmdutil.UsageErrorf(cmd, "--secret %s=-: standard input can supply only one secret", k)
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
				// Exit 7: the secret's source is input the command read, and it was not there.
				return nil, errclass.AsInvalid(fmt.Errorf("--secret %s=env:%s: the environment variable %s is unset or empty", k, name, name))
			}
			val = []byte(v)
		case strings.HasPrefix(src, "file:"):
			path := strings.TrimPrefix(src, "file:")
			b, err := cmdutil.ReadLimited(path, maxSecretInput)
			if err != nil {
				return nil, errclass.AsInvalid(fmt.Errorf("--secret %s=file:%s: %w", k, path, err))
			}
			val = trimNewline(b)
		default:
			return nil, &cmdutil.UsageError{Err: &literalSecretError{key: k}, Cmd: cmd}
		}
		if len(val) > maxSecretInput {
			return nil, errclass.AsInvalid(fmt.Errorf("--secret %s: over %d bytes", k, maxSecretInput))
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
	catalogcmd.EnvListItem
	Values     map[string]string `json:"values"`
	SecretKeys []string          `json:"secret_keys"`
	// Bindings are the bound secrets: key -> hosts and extra headers ({} when none).
	Bindings map[string]catalog.Binding `json:"bindings"`
}

func envShowRun(ctx context.Context, opts *catalogcmd.RefOptions) error {
	_, v, data, err := catalogcmd.ResolveContent(ctx, opts)
	if err != nil {
		return err
	}
	doc, err := catalog.ParseEnvDoc(data)
	if err != nil {
		return err
	}
	out := envShow{EnvListItem: catalogcmd.NewEnvListItem(v), Values: doc.Values, SecretKeys: catalog.SortedKeys(doc.Secrets), Bindings: doc.Bindings}
	if out.Values == nil {
		out.Values = map[string]string{}
	}
	if out.Bindings == nil {
		out.Bindings = map[string]catalog.Binding{}
	}
	return cmdutil.Emit(opts.F.IO, opts.Output, out, func(out envShow) error {
		w := opts.F.IO.Out
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
		if len(out.Bindings) > 0 {
			fmt.Fprintf(w, "bindings (the sandbox sees a placeholder; the egress proxy sends the value only to these hosts, over HTTPS, port 443 unless named):\n")
			for _, k := range catalog.SortedKeys(out.Bindings) {
				fmt.Fprintf(w, "  %s -> %s\n", k, catalogcmd.FmtBinding(out.Bindings[k]))
			}
		}
		return nil
	})
}
