package peercred

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestOf(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", ln.Addr().String())
		if err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cred, err := Of(c)
	if err != nil {
		t.Fatal(err)
	}
	if int(cred.Uid) != os.Getuid() || int(cred.Pid) != os.Getpid() {
		t.Errorf("cred %+v, want uid %d pid %d", cred, os.Getuid(), os.Getpid())
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := Of(a); err == nil {
		t.Error("a pipe has no peer credentials, yet Of returned some")
	}
}
