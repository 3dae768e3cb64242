package container

import (
	"fmt"
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/compute/fdpass"
)

// The tests bind this test binary into containers at /agora/bin/agora-worker: as the provider's
// shim it serves `fdpass -- ARGV...` exactly as the agora binary does, and its probes need
// nothing from the image.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "fdpass":
			if len(os.Args) < 4 || os.Args[2] != "--" {
				fmt.Fprintln(os.Stderr, "want: fdpass -- PROGRAM [ARG]...")
				os.Exit(2)
			}
			fmt.Fprintln(os.Stderr, fdpass.Exec(os.Args[3:], os.Environ()))
			os.Exit(1)
		case "probe-alloc":
			os.Exit(probeAlloc())
		case "probe-claim":
			os.Exit(probeClaim())
		case "probe-slot-worker":
			os.Exit(probeSlotWorker())
		case "probe-claim-exit":
			os.Exit(probeClaimExit())
		case "probe-noop":
			// The cold no-op: read the secret on fd 3, as a worker does, and exit.
			io.ReadAll(os.NewFile(3, "secrets"))
			fmt.Println("READY")
			os.Exit(0)
		case "hold-slot":
			os.Exit(holdSlot())
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// probeAlloc touches 256 MiB, a page at a time, and exits 0 if it ever gets there.
func probeAlloc() int {
	const size, page = 256 << 20, 4096
	var keep [][]byte
	for n := 0; n < size; n += 1 << 20 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	fmt.Println("allocated", len(keep), "MiB")
	return 0
}
