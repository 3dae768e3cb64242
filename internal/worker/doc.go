// Package worker is `agora worker`: the process that runs INSIDE the sandbox for one
// dispatch. It verifies the bundle, overlays the capability files their overlay: patterns
// name into the workspace, runs the
// capabilities' setup scripts, records a git baseline, runs the agent through its runtime
// under a deadline, captures the patch and the outputs, and writes one authoritative
// result.json. The files that cross the sandbox wall, [wire.Manifest] and [wire.Result], and
// the layout's paths and limits are package [wire]'s, shared with the host.
//
// worker sees only what is mounted into its sandbox. It MUST NOT import the store, the
// secret store, the provisioner, the manifest reconciler, AGORA_HOME or anything that opens
// a database, and it MUST NOT print, log or record a secret value: secrets reach it on a
// descriptor and leave it only in the agent's environment.
//
// # Sandbox layout
//
// The host builds the layout package [wire] describes, under [wire.DefaultRoot]; tests build
// it in a temporary directory and run the worker without a sandbox.
//
// # Steps
//
// Each step is timed and recorded as a [wire.Phase] of the result.
//
//  1. verify: manifest.json is read strictly; the SHA-256 of subagent.json and of each archive
//     must equal the manifest's digests; the document's runtime, command and capability list
//     must equal the manifest's; the manifest may grant nothing the archives' capability.yaml
//     files do not declare. Else integrity-failed. For the exec runtime the command must
//     match a granted commands pattern, else denied (the host checks too). A runtime this
//     build does not have is worker-failed.
//  2. secrets: the object on fd 3, at most 1 MiB, keys exactly Manifest.SecretKeys, else
//     fetch-failed.
//  3. overlay: the host mounts each capability's files read-only at
//     /agora/capabilities/NAME (AGORA_CAPABILITIES names the directory); only the files its
//     overlay: patterns match are written into the workspace too, in order
//     (capability.yaml never). The host refused, before the record, an overlaid path the
//     checkout or another capability has; an entry already there, a symlink in the workspace
//     on the way, or a file where a directory is needed, is integrity-failed and nothing is
//     written outside the workspace. Capture leaves the overlaid paths out of the patch.
//  4. setup: each declared setup script runs as `/bin/sh /agora/capabilities/NAME/<script>`
//     (which must hold the archive's bytes) with the agent's environment, cwd the workspace,
//     all within Manifest.SetupTimeoutSeconds, its process group killed at the deadline;
//     output goes to stderr. Failure is worker-failed.
//  5. baseline: a private repository in /tmp records the workspace (git add -A, write-tree),
//     so setup's files are not in the patch. See capture.go for the git hardening.
//  6. runtime: the agent runs with cwd the workspace and the environment PATH, HOME=/tmp,
//     LANG=C.UTF-8, then the manifest's env, then the secrets, then AGORA_INPUT_JSON (the
//     input, "{}" when empty), AGORA_DISPATCH_ID, AGORA_OUT=/agora/out,
//     AGORA_WORKSPACE=/agora/workspace, AGORA_CAPABILITIES=/agora/capabilities and, when
//     mounted, AGORA_INPUTS=/agora/inputs. Its
//     process group is killed at Manifest.AgentTimeoutSeconds (timeout) and when it exits.
//     A non-zero exit is worker-failed with the code, unless the agent asked a question.
//     The model runtimes run in the worker process instead (see below).
//  7. stop: when the host says the sandbox has its own PID namespace
//     (Manifest.PIDNamespace), every other process in it is killed (kill(-1, SIGKILL)) and
//     /proc is checked until none but zombies remain: a daemon the agent left (setsid,
//     double fork) cannot race what is hashed next. If any survives, nothing is captured.
//  8. needs_input: out/needs_input.json (see [wire.NeedsInput]), whatever the exit code, unless
//     the agent timed out: valid makes the status needs_input, invalid is worker-failed.
//  9. capture: out/patch.diff, a `git diff --cached --binary --full-index` against the
//     baseline without the overlaid paths, at most [wire.MaxPatchSize]; symlinks stay
//     symlinks.
//  10. outputs: regular files with one link under out/outputs/, at most [wire.MaxOutputs] files,
//     [wire.MaxOutputsSize] bytes and [wire.MaxOutputNames] bytes of names; symlinks, hard links and
//     special files are skipped and listed.
//  11. result.json, written whenever out/ is writable, even after a failure. It declares the
//     SHA-256 of the patch, each output and the transcript; the host stores those bytes only
//     when they still hash to it (package sandboxfs), else the dispatch is integrity-failed.
//
// Steps 1-5 stop the run at the first failure, and so does step 7. From the runtime on every
// other step runs, so a failed or questioning agent still leaves its patch and outputs; the
// first failure gives the reason.
//
// # Runtimes
//
// The worker runs the manifest's runtime through its adapter, found in the one table of
// adapters (package runtimes/adapters, generated from runtimes.All; agent.go runtimeFor),
// and prepares what the runtime's description asks for (verify.go: the gateway socket for a
// model route, [MCPConfigFile] for a runtime that loads MCP servers, the command check for a
// fixed command). Each adapter lives in its runtime's directory and gets an
// [agentrun.Invocation]: the openai loop over a [toolreg.View] of the built-in tools
// (openairt/openaiadapter), claude --print behind a loopback relay with agora's tool hook
// (claudert/claudeadapter; `agora-worker worker hook` reaches it through [HookMain]), codex
// exec behind a relay that judges each call before codex sees it (codexrt/codexadapter). The
// model runtimes reach the host only through the gateway socket ([agentrun.Gateway]): the
// model endpoint, http_fetch, approvals and /audit/tool, where every tool decision is
// reported before its result reaches the model (a decision that cannot be reported stops the
// run: fail closed). None ever holds the model API key: the gateway adds it. Their
// transcript (capped at [wire.MaxTranscript]), the model's answer and a question stay in the
// worker's memory until after the stop step; then they go to out/transcript.jsonl,
// out/outputs/final.md and out/needs_input.json (answer.go). A wall-time stop is a timeout;
// a turn or token budget spent is worker-failed, naming the budget. A subagent's MCP servers
// come from [MCPConfigFile] in its capability archive, never from the workspace.
//
// The package has more files than most because each step is a file of its own; none of
// them is shared with the host, which links only package [wire].
//
// [Main] returns 0 when result.json was written, whatever the status, and 1 when it could
// not be. Because the agent shares out/, the host MUST trust result.json only when the
// worker exited 0; the worker also deletes result.json and patch.diff after the agent
// exits, before writing its own.
package worker
