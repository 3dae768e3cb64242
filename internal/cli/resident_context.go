package cli

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
)

// processContext digests what of process pid (0: this one) a dispatch runs with besides its
// environment: its umask, user and groups (a docker socket reached through a group), its
// cgroup (the limits the sandbox's own nest under), its namespaces (a CLI in another mount or
// network namespace that reaches the socket by a bind mount) and its resource limits. The
// resident dispatcher stands in for the CLI that started it: a CLI whose context is not its
// own runs its dispatch itself (red team 45). The working directory is not in it: a handed
// dispatch carries no relative path (a relative --repo is never handed off).
func processContext(pid int) (string, error) {
	proc := "/proc/self"
	if pid > 0 {
		proc = "/proc/" + strconv.Itoa(pid)
	}
	h := sha256.New()
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Bytes()
		for _, k := range [][]byte{[]byte("Umask:"), []byte("Uid:"), []byte("Gid:"), []byte("Groups:")} {
			if bytes.HasPrefix(line, k) {
				h.Write(line)
				h.Write([]byte{'\n'})
			}
		}
	}
	for _, f := range []string{"/cgroup", "/limits"} {
		b, err := os.ReadFile(proc + f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	for _, ns := range []string{"mnt", "net", "pid", "user", "ipc", "uts", "cgroup"} {
		link, err := os.Readlink(proc + "/ns/" + ns)
		if err != nil {
			return "", err
		}
		h.Write([]byte(link + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
