package cmdutil

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// IOStreams are a command's standard streams. stdout carries only the result; progress,
// warnings and errors go to stderr.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// OutTTY says whether Out is a terminal: tables then get headers and relative times.
	OutTTY bool
	// ErrTTY says whether ErrOut is a terminal: progress is then shown as it happens.
	ErrTTY bool
	// InTTY says whether In is a terminal (secrets are then read without echo).
	InTTY bool
}

// System returns the process's streams.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		OutTTY: isTerminal(os.Stdout), ErrTTY: isTerminal(os.Stderr), InTTY: isTerminal(os.Stdin),
	}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
