package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// A pool pod (remote/pool.go) has no slot token in its spec: its init step enrols with
// the pod's projected ServiceAccount token ([Enroll]) and writes the answer, its slot id and
// slot token, to [remote.SlotFileEnv]'s file, in a memory volume the worker's container
// mounts; [ClaimFromEnv] in the worker's container reads that file once and removes it. The
// projected token is mounted in the init step alone: the agent, which runs in the worker's
// container, never sees it.

// Enroll presents jwt, the pod's projected token, to the gateway at rawURL and returns the
// pod's slot. A refusal (401: not a pod of agora's pool, or one that enrolled already) is
// final; a gateway that does not answer is retried for [OutageLimit].
func Enroll(ctx context.Context, rawURL string, caPEM []byte, jwt string, log io.Writer) (remote.EnrollAnswer, error) {
	if jwt == "" || len(jwt) > remote.MaxEnrollToken {
		return remote.EnrollAnswer{}, errors.New("enrol: no projected token, or one too long")
	}
	// The client's dispatch and token are placeholders: the one request it makes carries the
	// projected token.
	sc, err := NewSocketClient(rawURL, "", "pool", "enroll", caPEM)
	if err != nil {
		return remote.EnrollAnswer{}, err
	}
	defer sc.Close()
	sc.log = log
	r := sc.retry("POST enroll")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, sc.base.String()+remote.EnrollRoute, nil)
		if err != nil {
			return remote.EnrollAnswer{}, err
		}
		req.Header.Set("Authorization", "Bearer "+jwt)
		resp, err := sc.http.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, remote.MaxEnrollAnswer+1))
			resp.Body.Close()
			defer clear(b)
			if rerr != nil {
				return remote.EnrollAnswer{}, fmt.Errorf("POST enroll: %w", rerr)
			}
			return remote.ParseEnrollAnswer(b)
		}
		if err == nil {
			err = statusError(http.MethodPost, "enroll", resp)
			resp.Body.Close()
			if !transientStatus(resp.StatusCode) {
				return remote.EnrollAnswer{}, err
			}
		} else if !transient(ctx, err) {
			return remote.EnrollAnswer{}, fmt.Errorf("POST enroll: %w", err)
		}
		// An enrolment whose answer was lost is not retried into success: the gateway took
		// the pod's token once, and a second try is refused (401), failing the pod.
		if werr := r.wait(ctx, err); werr != nil {
			return remote.EnrollAnswer{}, werr
		}
	}
}

// enrollFromEnv is a pool pod's init step's enrolment: it reads the projected token from
// [remote.SlotEnrollEnv]'s path, enrols, and writes the answer to [remote.SlotFileEnv]'s path
// (0600, made new: never over something there).
func enrollFromEnv(ctx context.Context, stderr io.Writer) error {
	tokenPath, out := os.Getenv(remote.SlotEnrollEnv), os.Getenv(remote.SlotFileEnv)
	u, ca := os.Getenv(remote.GatewayURLEnv), os.Getenv(remote.CAEnv)
	for _, k := range []string{remote.SlotEnrollEnv, remote.SlotFileEnv, remote.GatewayURLEnv, remote.CAEnv} {
		os.Unsetenv(k)
	}
	if tokenPath == "" || out == "" {
		return fmt.Errorf("a pool pod's init step needs %s and %s", remote.SlotEnrollEnv, remote.SlotFileEnv)
	}
	// Followed: the kubelet's projected volume names the token through symlinks of its own
	// (token -> ..data/token), in a volume of agora's pod spec.
	jwt, err := readSmall(tokenPath, remote.MaxEnrollToken, true)
	if err != nil {
		return fmt.Errorf("read the pod's projected token: %w", err)
	}
	a, err := Enroll(ctx, u, []byte(ca), string(jwt), stderr)
	clear(jwt)
	if err != nil {
		return fmt.Errorf("enrol the pool pod: %w", err)
	}
	b := []byte(`{"slot":"` + a.Slot + `","token":"` + a.Token + `"}`)
	defer clear(b)
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write the pod's slot: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the pod's slot: %w", err)
	}
	return nil
}

// slotFromFile reads a pool pod's slot from path (written by its init step) and removes the
// file, so nothing the agent runs later finds the slot token there (it is dead after the
// claim anyway).
func slotFromFile(path string) (remote.EnrollAnswer, error) {
	b, err := readSmall(path, remote.MaxEnrollAnswer, false)
	defer clear(b)
	if err != nil {
		return remote.EnrollAnswer{}, fmt.Errorf("read the pod's slot: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return remote.EnrollAnswer{}, fmt.Errorf("remove the pod's slot file: %w", err)
	}
	return remote.ParseEnrollAnswer(b)
}

// readSmall reads the file at path (a symlink followed only when follow says so), at most
// limit bytes.
func readSmall(path string, limit int, follow bool) ([]byte, error) {
	flags := os.O_RDONLY | syscall.O_CLOEXEC
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		clear(b)
		return nil, fmt.Errorf("%s is over %d bytes", path, limit)
	}
	return b, nil
}
