package kubernetes

import "syscall"

// signalName names signal n as the local provider does ("killed" for SIGKILL).
func signalName(n int) string { return syscall.Signal(n).String() }
