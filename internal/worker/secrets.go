package worker

import (
	"context"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/strictjson"
)

// readSecrets reads the secrets object when the manifest names secret keys: a JSON object
// of strings whose keys are exactly Manifest.SecretKeys. No message here ever includes a
// value or a parser error (which could quote part of one); keys are not secret.
func (r *runner) readSecrets(ctx context.Context) *failure {
	r.secrets = map[string]string{}
	if len(r.man.SecretKeys) == 0 {
		return nil
	}
	f := r.opts.SecretsFile
	if f == nil && r.opts.secretsFD > 0 {
		// Only now, when the host promised a descriptor, and only once fstat shows a pipe or
		// a file: a descriptor the host did not pass may belong to the Go runtime (its poller),
		// and an *os.File would close it when collected.
		var st syscall.Stat_t
		if err := syscall.Fstat(r.opts.secretsFD, &st); err != nil {
			return fail(lifecycle.ReasonFetchFailed, "secrets: descriptor %d is not open", r.opts.secretsFD)
		}
		if t := st.Mode & syscall.S_IFMT; t != syscall.S_IFREG && t != syscall.S_IFIFO {
			return fail(lifecycle.ReasonFetchFailed, "secrets: descriptor %d is not a pipe or a file", r.opts.secretsFD)
		}
		f = os.NewFile(uintptr(r.opts.secretsFD), "secrets")
		r.opts.SecretsFile = f
	}
	if f == nil {
		return fail(lifecycle.ReasonFetchFailed, "secrets: the manifest names %d secret keys but no secrets descriptor was passed", len(r.man.SecretKeys))
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(lifecycle.ReasonFetchFailed, "secrets: stat the descriptor: %v", err)
	}
	if m := fi.Mode(); !m.IsRegular() && m&os.ModeNamedPipe == 0 {
		return fail(lifecycle.ReasonFetchFailed, "secrets: the descriptor is a %v, want a pipe or a file", m.Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretsSize+1))
	r.closeSecretsFile()
	if err != nil {
		return fail(lifecycle.ReasonFetchFailed, "secrets: read the descriptor: %v", err)
	}
	if len(b) > maxSecretsSize {
		return fail(lifecycle.ReasonFetchFailed, "secrets: over the %d byte limit", maxSecretsSize)
	}
	var got map[string]string
	if strictjson.Decode("secrets", b, maxSecretsSize, &got) != nil || got == nil {
		return fail(lifecycle.ReasonFetchFailed, "secrets: not a JSON object of string values")
	}
	var missing, extra []string
	for _, k := range r.man.SecretKeys {
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if !slices.Contains(r.man.SecretKeys, k) {
			extra = append(extra, k)
		}
	}
	switch {
	case len(missing) > 0:
		return fail(lifecycle.ReasonFetchFailed, "secrets: missing keys %s", strings.Join(missing, ", "))
	case len(extra) > 0:
		// Keys the manifest does not name are only listed by count: they could be anything.
		return fail(lifecycle.ReasonFetchFailed, "secrets: %d keys the manifest does not name", len(extra))
	}
	for _, k := range r.man.SecretKeys {
		if strings.ContainsRune(got[k], 0) {
			return fail(lifecycle.ReasonFetchFailed, "secrets: the value of %s contains a NUL byte", k)
		}
	}
	r.secrets = got
	return nil
}

func (r *runner) closeSecretsFile() {
	if r.opts.SecretsFile != nil {
		r.opts.SecretsFile.Close()
		r.opts.SecretsFile = nil
	}
}
