#!/usr/bin/env bash
# The main job on the embedded defaults: a throw-away AGORA_HOME (SQLite, local blob store),
# the example catalog registered from its manifest, a sandboxed dispatch (bubblewrap) against a
# scratch git repository with its patch, and the audit trail exported and verified offline.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap and git: installed here as root or with passwordless sudo, else the exact command
# and exit 2 (scripts/prereqs.sh), before anything is created.
scripts/prereqs.sh || exit $?

bin=${AGORA_BIN:-./bin/agora}
export AGORA_HOME=${AGORA_HOME:-$(mktemp -d -t agora-demo.XXXXXX)}
export DEMO_API_TOKEN=${DEMO_API_TOKEN:-demo-token-$RANDOM$RANDOM$RANDOM}
work=$(mktemp -d -t agora-demo-work.XXXXXX)

step() { printf '\n== %s\n' "$*"; }

step "AGORA_HOME=$AGORA_HOME"
"$bin" init

step "agora doctor (what this host enforces on a sandbox, and how to get the rest)"
"$bin" doctor || true

step "agora apply -f examples/catalog/agora-manifest.yaml (plan, then one transaction)"
"$bin" apply -f examples/catalog/agora-manifest.yaml

step "a second apply has nothing to do"
"$bin" apply -f examples/catalog/agora-manifest.yaml

step "the catalog"
"$bin" capability list
"$bin" subagent list
"$bin" env list

step "a scratch repository to work on: $work/repo"
git init -q -b main "$work/repo"
printf '# demo\n' > "$work/repo/README.md"
git -C "$work/repo" add README.md
git -C "$work/repo" -c user.name=demo -c user.email=demo@example.invalid commit -q -m init

step "agora dispatch run --subagent hello --env demo --repo $work/repo (sandboxed)"
id=$("$bin" dispatch run --subagent hello --env demo --repo "$work/repo" --input '{"task":"greet"}')

step "agora dispatch patch $id (review it, then git apply)"
"$bin" dispatch patch "$id" | tee "$work/hello.patch"
git -C "$work/repo" apply --check "$work/hello.patch" && echo "(the patch applies cleanly to the dispatched revision)"

step "agora dispatch patch $id --branch agora/hello (a reviewable commit; nothing checked out or pushed)"
"$bin" dispatch patch "$id" --branch agora/hello
git -C "$work/repo" log --format='%h %an%n    %s' main..agora/hello

step "agora audit export + agora verify (offline, no AGORA_HOME needed)"
"$bin" audit checkpoint >/dev/null
"$bin" audit export --out "$work/bundle.json"
AGORA_HOME=/nonexistent "$bin" verify "$work/bundle.json" --key "$AGORA_HOME/keys/audit.pub"

step "agora orch serve (the orchestrator service, in the background for the demo)"
"$bin" orch serve 2>"$work/serve.log" &
serve_pid=$!
trap 'kill "$serve_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$AGORA_HOME/orch/orch.sock" ] && break; sleep 0.05; done

step "agora orch validate + submit examples/plans/demo.yaml --repo $work/repo --wait"
echo "(each task writes its own file: greet-docs docs/GREETING.md and greet-readme README.md hold"
echo " disjoint locks and run in parallel; review waits for both and is handed greet-docs' patch at"
echo " /agora/inputs/docs-patch/patch.diff, which its REVIEW.md quotes; tidy-a and tidy-b share the"
echo " exclusive lock 'repo', so one runs after the other. scribe writes when it ran into each file."
echo " greet-docs is verified by agora itself: its verify command runs in a fresh sandbox on the base"
echo " tree plus its patch, and the verdict is audited and shown in the status and the bundle)"
"$bin" orch validate examples/plans/demo.yaml
run=$("$bin" orch submit examples/plans/demo.yaml --repo "$work/repo" --wait)
"$bin" orch status "$run"

step "agora orch patches $run --to $work/patches (one reviewable patch per task)"
"$bin" orch patches "$run" --to "$work/patches"
for p in "$work"/patches/*.patch; do echo "--- $(basename "$p")"; cat "$p"; done

step "when each task ran, from its patch (sorted by start): greet-docs and greet-readme overlap, tidy-a and tidy-b never do"
grep -h '^+[^ ].* ran [0-9:.]* to [0-9:.]* UTC)$' "$work"/patches/*.patch | sed 's/^+.*(//; s/)$//' | sort -k3

step "agora orch audit $run + agora verify (the run and every dispatch of it, offline)"
"$bin" orch audit "$run" --out "$work/run-bundle.json"
AGORA_HOME=/nonexistent "$bin" verify "$work/run-bundle.json" --key "$AGORA_HOME/keys/audit.pub" | tail -8

step "next: a model-driven subagent (runtime openai) needs a model endpoint"
cat <<'TXT'
The example catalog also registers `reviewer` (runtime openai). To run it against a real
OpenAI-compatible endpoint (OpenAI, vLLM, Ollama), give it an env bundle; the API key stays
on the host, in the dispatch's gateway, and never enters the sandbox:

  agora env register model --value OPENAI_BASE_URL=https://api.openai.com/v1 \
      --secret OPENAI_API_KEY=env:OPENAI_API_KEY
  agora dispatch run --subagent reviewer --env model --repo . --input '{"prompt":"review the last commit"}'

For Ollama on this machine: OPENAI_BASE_URL=http://127.0.0.1:11434/v1 and
`egress: {allow_private: [127.0.0.1/32]}` in AGORA_HOME/agora.yaml. See docs/runtimes.md.
TXT

printf '\nagora demo: done. AGORA_HOME=%s, work in %s\n' "$AGORA_HOME" "$work"
