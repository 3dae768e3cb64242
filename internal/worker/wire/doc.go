// Package wire is the contract across the sandbox wall: what the host puts into a dispatch's
// sandbox and what the worker leaves there for it. It owns the two files that cross the wall,
// so the host writes the one and reads the other with the same definitions: [Manifest]
// ([ParseManifest]), written by the host and read by the worker, and [Result]
// ([ParseResult]), with the agent's [NeedsInput], written by the worker and read by the host.
// It also owns every path, file name and limit of the layout below, which both sides name.
//
// wire is plain data on both sides of the privilege boundary. It MUST NOT import the worker,
// the dispatcher, a runtime, the built-in tools, the store or the secret store: the host links
// it without linking the code that runs in the sandbox, and the worker without the host's.
//
// # Sandbox layout
//
// The host builds this layout (paths under [DefaultRoot]); tests build it in a temporary
// directory and run the worker without a sandbox ([RootEnv]).
//
//	/agora/bin/agora-worker       the worker program (cmd/agora-worker), read-only: a copy the
//	                              host pinned by its sha256 (package workerbin)
//	/agora/bundle/manifest.json   read-only: a [Manifest]
//	/agora/bundle/subagent.json   read-only: the subagent document, digest Manifest.Subagent.Digest
//	/agora/bundle/capabilities/<hex>.tar
//	                              read-only: each capability archive, named by its digest
//	/agora/workspace              read-write: a git checkout of the chosen revision (with its own
//	                              .git), or an empty directory; the agent's working directory
//	/agora/out                    read-write: the agent may write out/outputs/** and
//	                              out/needs_input.json; the worker writes out/patch.diff, a
//	                              model's answer as out/outputs/final.md and its transcript
//	                              (after the stop step) and, last, out/result.json (each a
//	                              temporary file and a rename)
//	/agora/inputs                 read-only, may be absent: upstream products
//	/agora/gateway/gateway.sock   model runtimes only: the host's gateway (read-only bind); the
//	                              model, http_fetch and the tool audit are reached through it
//	/tmp                          private scratch: the baseline repository, HOME
//	fd 3                          only when Manifest.SecretKeys is not empty: a JSON object
//	                              {"KEY":"value",...} with exactly those keys; read and closed
package wire
