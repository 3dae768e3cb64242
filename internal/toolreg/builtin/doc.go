// Package builtin registers the tools agora ships (grant.BuiltinTools) in a [toolreg.Registry]:
// read_file, write_file, list_files and search_files confined to the workspace, run_command
// for argv granted by a capability's command patterns, http_fetch for granted hosts through
// the caller's fetcher, and ask_human, which stops the dispatch for a person.
//
// builtin runs INSIDE the sandbox, in the worker process. It owns the confinement of each
// tool: file tools go through an [os.Root] on the workspace, so absolute paths, ".." and
// symbolic links that lead out are refused; run_command execs argv directly (no shell unless
// a pattern names one) with the environment it is given, nothing inherited; http_fetch never
// dials: the worker's [FetchFunc] reaches the host-side gateway. It MUST NOT import store,
// audit, dispatch or anything else host-side, and its errors MUST NOT repeat raw arguments
// (paths, URLs, commands), since they reach the audit record.
package builtin
