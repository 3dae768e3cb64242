// Package agentproc holds what the runtimes that run an agent CLI as a process (claude-code's
// claudert, codex's codexrt) share: the errors they report when the CLI is missing, fails or
// runs past its budget, the stderr feed that keeps the CLI's last words for those errors, and
// the argv that hands the CLI its prompt on stdin without putting it in argv.
//
// It runs INSIDE the sandbox (the worker links both runtimes) and imports only the standard
// library; a runtime keeps what is its own (its CLI's flags, its output's grammar).
package agentproc
