package callerctx

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
)

// Process is what of a process a dispatch runs with besides its environment, one digest
// per part, in a fixed order: its umask, user and groups (a docker socket reached through a
// group), its cgroup (the limits the sandbox's own nest under), its resource limits and its
// namespaces (a CLI in another mount or network namespace that reaches the socket by a bind
// mount). The resident dispatcher stands in for the CLI that started it: a CLI whose context
// is not its own runs its dispatch itself, told which parts differ. The working
// directory is not in it: a handed dispatch carries no relative path (a relative --repo is
// never handed off).
type Process []processPart

// processPart is one part of a [Process]: its name, as a decline says it, and the sha256 of
// what /proc shows of it.
type processPart struct{ name, sum string }

// Differ names the parts of c that are not those of o (all of them when the two were not
// read alike), in order; none when the contexts are the same.
func (c Process) Differ(o Process) []string {
	var names []string
	for i, p := range c {
		if i >= len(o) || o[i] != p {
			names = append(names, p.name)
		}
	}
	if len(o) > len(c) || (len(c) == 0 && len(o) == 0) {
		// Not read alike (or not read at all): never the same.
		names = append(names, "the process context")
	}
	return names
}

// ReadProcess reads the [Process] of process pid (0: this one).
func ReadProcess(pid int) (Process, error) {
	proc := "/proc/self"
	if pid > 0 {
		proc = "/proc/" + strconv.Itoa(pid)
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		return nil, err
	}
	var c Process
	for _, k := range []struct{ name, key string }{{"umask", "Umask:"}, {"uid", "Uid:"}, {"gid", "Gid:"}, {"groups", "Groups:"}} {
		var line []byte
		sc := bufio.NewScanner(bytes.NewReader(status))
		for sc.Scan() {
			if bytes.HasPrefix(sc.Bytes(), []byte(k.key)) {
				line = append([]byte(nil), sc.Bytes()...)
				break
			}
		}
		c = append(c, processPart{k.name, sum(line)})
	}
	for _, f := range []string{"cgroup", "limits"} {
		b, err := os.ReadFile(proc + "/" + f)
		if err != nil {
			return nil, err
		}
		c = append(c, processPart{f, sum(b)})
	}
	for _, ns := range []string{"mnt", "net", "pid", "user", "ipc", "uts", "cgroup"} {
		link, err := os.Readlink(proc + "/ns/" + ns)
		if err != nil {
			return nil, err
		}
		c = append(c, processPart{ns + " namespace", sum([]byte(link))})
	}
	return c, nil
}
