package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// A Kubernetes warm slot's read-only places (compute/remote/slotfill.go). The
// slot's init step makes each place's entries ([premakePlaces]); the filler ([FillMain], a
// container of its own holding the places' volumes writable, which the worker's container
// mounts read-only) waits for the worker's grant on a Unix socket, fetches the dispatch's
// read-only mounts into the places and answers; the worker ([handOver]) then fetches the rest.
// The filler holds no token until the worker hands it the dispatch's, never shares a process
// namespace with the agent, and has ended by the time the agent runs.

// Bounds of the hand-over.
const (
	// fillConnectWait bounds the worker's wait for the filler's socket (the two containers
	// start together; the claim usually takes longer).
	fillConnectWait = 2 * time.Minute
	// fillGrantWait bounds the filler's read of the grant once the worker connected.
	fillGrantWait = 30 * time.Second
	// fillTmp is where a place's mount is fetched before it is moved in, inside the place's
	// own volume (one file system: a rename), removed before the filler answers.
	fillTmp = ".agora-fill"
)

// premakePlaces makes, in the stage's place volumes, each file place's entry and the mount
// points of the places nested in a directory place: the kubelet would make a directory for a
// missing subPath entry, and no runtime can make a mount point inside a read-only mount.
func premakePlaces(stage string, places []remote.SlotPlace) error {
	for i, p := range places {
		dir := filepath.Join(stage, remote.SlotPlaceVolumePrefix+strconv.Itoa(i))
		if p.File {
			if err := makeEntry(filepath.Join(dir, remote.FileName), true); err != nil {
				return fmt.Errorf("slot place %s: %w", p.Dst, err)
			}
			continue
		}
		for _, rel := range nestedPlaces(places, p.Dst) {
			q := filepath.Join(dir, rel.path)
			if err := os.MkdirAll(filepath.Dir(q), 0o755); err != nil {
				return fmt.Errorf("slot place %s: %w", p.Dst, err)
			}
			if err := makeEntry(q, rel.file); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("slot place %s: %w", p.Dst, err)
			}
		}
	}
	return nil
}

// nestedPlace is a place below another, by its path relative to that one.
type nestedPlace struct {
	path string
	file bool
}

func nestedPlaces(places []remote.SlotPlace, dst string) []nestedPlace {
	var out []nestedPlace
	for _, q := range places {
		if rel, ok := strings.CutPrefix(q.Dst, dst+"/"); ok {
			out = append(out, nestedPlace{rel, q.File})
		}
	}
	return out
}

func makeEntry(path string, file bool) error {
	if !file {
		return os.Mkdir(path, 0o755)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// FillMain is `agora-worker worker fill`, a Kubernetes warm slot's filler: it waits for the
// worker's grant on [remote.SlotFillEnv]'s socket, fills the places and answers. It returns the
// process exit code.
func FillMain(ctx context.Context, stderr io.Writer) int {
	if err := fillMain(ctx, stderr); err != nil {
		fmt.Fprintf(stderr, "agora worker fill: error: %v\n", err)
		return 1
	}
	return 0
}

func fillMain(ctx context.Context, stderr io.Writer) error {
	stage, sock, u, ca := os.Getenv(remote.StageEnv), os.Getenv(remote.SlotFillEnv), os.Getenv(remote.GatewayURLEnv), os.Getenv(remote.CAEnv)
	places, err := remote.ParseSlotPlaces(os.Getenv(remote.SlotPlacesEnv))
	if err != nil {
		return err
	}
	if !filepath.IsAbs(stage) || !filepath.IsAbs(sock) {
		return fmt.Errorf("%s and %s must be absolute paths", remote.StageEnv, remote.SlotFillEnv)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listen for the worker: %w", err)
	}
	// One connection, the worker's (the only process of its container before the claim);
	// nothing connects after it.
	conn, err := acceptOne(ctx, ln)
	ln.Close()
	os.Remove(sock)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(fillGrantWait))
	line, err := bufio.NewReaderSize(conn, remote.MaxSlotGrant+1).ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("read the worker's grant: %w", err)
	}
	g, err := ParseGrant(line)
	clear(line)
	if err != nil {
		return err
	}
	conn.SetReadDeadline(time.Time{})
	c, err := NewClient(u, g.Dispatch, g.Token, []byte(ca))
	if err != nil {
		return answerFill(conn, nil, err)
	}
	defer c.Close()
	c.log = stderr
	fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	filled, err := fillPlaces(fctx, c, stage, places)
	return answerFill(conn, filled, err)
}

// acceptOne accepts one connection, or returns when ctx ends.
func acceptOne(ctx context.Context, ln net.Listener) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	conn, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("wait for the worker: %w", err)
	}
	return conn, nil
}

// answerFill tells the worker what was filled, or why not; it returns err.
func answerFill(conn net.Conn, filled []string, err error) error {
	a := remote.SlotFillAnswer{Filled: filled}
	if a.Filled == nil {
		a.Filled = []string{}
	}
	if err != nil {
		a = remote.SlotFillAnswer{Filled: []string{}, Error: err.Error()}
	}
	b, _ := json.Marshal(a)
	if _, werr := conn.Write(append(b, '\n')); werr != nil && err == nil {
		err = fmt.Errorf("answer the worker: %w", werr)
	}
	return err
}

// fillPlaces fetches each read-only mount of the dispatch into its place and returns the
// mounts' names. The dispatch's read-only mounts must be exactly the places (the host checked
// so before the bind; the filler checks again).
func fillPlaces(ctx context.Context, c *Client, stage string, places []remote.SlotPlace) ([]string, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	if v := Version(); info.Version != v {
		return nil, fmt.Errorf("worker is agora %s, the host runs %s: start the slot from this agora's worker", v, info.Version)
	}
	matched, err := remote.MatchSlotPlaces(places, info.Mounts)
	if err != nil {
		return nil, err
	}
	filled := []string{}
	for i, p := range places {
		m := matched[i]
		if !remote.ValidMountName(m.Name) {
			return nil, fmt.Errorf("mount name %q is not valid", m.Name)
		}
		dir := filepath.Join(stage, remote.SlotPlaceVolumePrefix+strconv.Itoa(i))
		if err := fillPlace(ctx, c, m, dir, nestedPlaces(places, p.Dst)); err != nil {
			return nil, fmt.Errorf("slot place %s: %w", p.Dst, err)
		}
		filled = append(filled, m.Name)
	}
	return filled, nil
}

// fillPlace fetches m into dir, its place's volume: a file into the entry the init step made
// (written in place: the worker's subPath mount is of that inode), a directory's entries moved
// in around the mount points of the places nested in it.
func fillPlace(ctx context.Context, c *Client, m remote.Mount, dir string, nested []nestedPlace) error {
	if !m.Fetch {
		return nil // nothing of the host's: the place stays empty
	}
	tmp := filepath.Join(dir, fillTmp)
	if m.File {
		defer os.RemoveAll(tmp)
	}
	if err := c.Fetch(ctx, m, tmp); err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	if m.File {
		return copyInPlace(filepath.Join(tmp, remote.FileName), filepath.Join(dir, remote.FileName))
	}
	skip := make([]string, 0, len(nested)+1)
	for _, n := range nested {
		skip = append(skip, n.path)
	}
	if err := mergeInto(tmp, dir, "", append(skip, fillTmp)); err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	return moveInTmpNamed(tmp, dir)
}

// moveInTmpNamed moves in, last, the fetched directory's own entry named as the temporary
// directory (a bundle or an input may have one): merged as the rest, it was taken
// for the temporary directory itself and removed with it. It is parked in a fresh directory
// of the place, the temporary directory removed, then moved to its name.
func moveInTmpNamed(tmp, dir string) error {
	own := filepath.Join(tmp, fillTmp)
	if _, err := os.Lstat(own); errors.Is(err, fs.ErrNotExist) {
		return os.RemoveAll(tmp)
	} else if err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	park, err := os.MkdirTemp(dir, fillTmp+"-")
	if err != nil {
		return err
	}
	parked := filepath.Join(park, fillTmp)
	if err := os.Rename(own, parked); err != nil {
		return errors.Join(err, os.RemoveAll(park), os.RemoveAll(tmp))
	}
	if err := os.RemoveAll(tmp); err != nil {
		return errors.Join(err, os.RemoveAll(park))
	}
	if err := os.Rename(parked, tmp); err != nil {
		return errors.Join(err, os.RemoveAll(park))
	}
	return os.Remove(park)
}

// copyInPlace writes src's bytes and mode into the existing regular file dst.
func copyInPlace(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return errors.Join(fmt.Errorf("%s is not a regular file", filepath.Base(src)), err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(fi.Mode().Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// mergeInto moves src/rel's entries into dst/rel: an entry dst lacks is renamed there whole,
// a directory both have is merged, a nested place's mount point (skip) is left as the init
// step made it. Anything else that dst has already is refused.
func mergeInto(src, dst, rel string, skip []string) error {
	ents, err := os.ReadDir(filepath.Join(src, rel))
	if err != nil {
		return err
	}
	for _, e := range ents {
		r := filepath.Join(rel, e.Name())
		if slices.Contains(skip, r) {
			continue
		}
		to := filepath.Join(dst, r)
		fi, err := os.Lstat(to)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Rename(filepath.Join(src, r), to); err != nil {
				return err
			}
		case err != nil:
			return err
		case fi.IsDir() && e.IsDir():
			if err := mergeInto(src, dst, r, skip); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: in the place before the fill, not a directory both have", r)
		}
	}
	return nil
}

// handOver is the worker's side: it gives the filler at sock its grant (c's dispatch and
// token) and returns the mounts the filler filled.
func handOver(ctx context.Context, sock string, c *Client) (map[string]bool, error) {
	conn, err := dialFiller(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	g, _ := json.Marshal(remote.SlotGrant{Dispatch: c.dispatch, Token: c.token})
	_, err = conn.Write(append(g, '\n'))
	clear(g)
	if err != nil {
		return nil, fmt.Errorf("hand the grant to the filler: %w", err)
	}
	line, err := bufio.NewReaderSize(conn, remote.MaxSlotFillAnswer+1).ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("the filler's answer: %w", err)
	}
	return parseFillAnswer(line)
}

// parseFillAnswer reads the filler's answer strictly.
func parseFillAnswer(b []byte) (map[string]bool, error) {
	var a remote.SlotFillAnswer
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&a); err != nil || d.More() || len(a.Filled) > remote.MaxSlotPlaces {
		return nil, errors.New("the filler's answer is not one")
	}
	if a.Error != "" {
		return nil, fmt.Errorf("the filler: %s", a.Error)
	}
	out := map[string]bool{}
	for _, n := range a.Filled {
		if !remote.ValidMountName(n) || out[n] {
			return nil, fmt.Errorf("the filler's answer names mount %q", n)
		}
		out[n] = true
	}
	return out, nil
}

// dialFiller connects to the filler's socket, waiting for it to listen.
func dialFiller(ctx context.Context, sock string) (net.Conn, error) {
	deadline := time.Now().Add(fillConnectWait)
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", sock)
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("reach the slot's filler: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
