package workerbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rt28s3PinChildEnv makes the test binary a process that pins SOURCE into DIR
// ("SOURCE\nDIR") and exits: 0 pinned, 3 refused.
const rt28s3PinChildEnv = "AGORA_WORKERBIN_RT28S3_PIN"

func rt28s3PinChild() {
	src, dir, _ := strings.Cut(os.Getenv(rt28s3PinChildEnv), "\n")
	b, err := (&Pinner{Dir: dir}).Pin(context.Background(), src, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pin:", err)
		os.Exit(3)
	}
	fmt.Println(b.Path)
	os.Exit(0)
}

// TestRedTeam28S3_CopyChangedWhilePinnedIsNeverTrusted attacks the identity a fresh pin
// records for its copy (06ef71e: taken after the temporary name is unlinked, so that the
// next dispatch takes the pin on two stats and never hashes the copy again). Whatever is at
// the copy's name when that identity is taken is trusted from then on; so between the link
// of the copy and its identity (widened here to 300 ms by strace delaying the unlink of the
// temporary name, in a real second process) the copy is replaced by a script (a rename
// over it) or rewritten in place (chmod, a byte, chmod back). The next pin, by a fresh
// Pinner reading the index as the next dispatch would, must bind a copy holding the bytes of
// its digest.
func TestRedTeam28S3_CopyChangedWhilePinnedIsNeverTrusted(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("SKIP: strace is not installed; it widens the pin's window between link and identity")
	}
	if out, err := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "inject=unlinkat:delay_exit=1", "true").CombinedOutput(); err != nil {
		t.Skipf("SKIP: strace cannot trace here (%v: %s)", err, out)
	}
	for _, attack := range []string{"rename over", "rewrite in place"} {
		t.Run(attack, func(t *testing.T) {
			src := installed(t, t.TempDir())
			digest := sumFile(t, src)
			dir := filepath.Join(t.TempDir(), DirName)
			cp := filepath.Join(dir, Name+"-"+digest)
			// Every unlinkat of the child is delayed on its way out: the first is writeCopy's
			// removal of the temporary name, between the link at cp and the stat of cp.
			cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=unlinkat", "-e", "inject=unlinkat:delay_exit=300000",
				os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), rt28s3PinChildEnv+"="+src+"\n"+dir)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				if _, err := os.Lstat(cp); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the child made no copy at %s in 60 s: %s", cp, stderr.String())
				}
				time.Sleep(200 * time.Microsecond)
			}
			switch attack {
			case "rename over":
				evil := filepath.Join(dir, "evil")
				if err := os.WriteFile(evil, []byte("#!/bin/sh\necho pwned\n"), 0o555); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(evil, cp); err != nil {
					t.Fatal(err)
				}
			case "rewrite in place":
				rewriteKeepingLooks(t, cp, cp)
			}
			cmd.Wait() // pinned or refused: either is fine for the one dispatch racing here
			t.Logf("the racing pin: exit %d, %s", cmd.ProcessState.ExitCode(), strings.TrimSpace(stderr.String()))
			for _, p := range []*Pinner{{Dir: dir}, {Dir: dir}} {
				b, err := p.Pin(t.Context(), src, false)
				if err != nil {
					t.Fatal(err)
				}
				if got := sumFile(t, b.Path); got != b.SHA256 || got != digest {
					t.Fatalf("the next pin binds %s, which hashes %s; the pin says %s, the worker is %s", b.Path, got, b.SHA256, digest)
				}
			}
		})
	}
}
