#!/usr/bin/env bash
# Drives the real agora binary with the MCP Inspector CLI (npx @modelcontextprotocol/inspector
# --cli), a client nobody on this team wrote, over stdio and over HTTP: tools/list must show
# exactly the eleven run-time tools (and pass the Inspector's --strict schema checks),
# agora_capabilities_list must answer, a read ceiling must hide and refuse agora_dispatch, a
# mistyped AGORA_HOME must reach the client as a tool error naming 'agora init', and HTTP
# without a token must be refused.
#
# Node >= 22 and the Inspector are installed from the npm registry into .cache/mcp-inspector
# (gitignored) on first use. Without npm the check cannot run: it says SKIP loudly and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

INSPECTOR_VERSION=2.12.0
NODE_VERSION=22
cache=$root/.cache/mcp-inspector

if ! command -v npm >/dev/null 2>&1; then
  echo "########################################################################" >&2
  echo "SKIP: npm is not installed, so the MCP Inspector check did NOT run." >&2
  echo "      Install it (apt-get install npm) and run: make mcp-inspector" >&2
  echo "########################################################################" >&2
  exit 0
fi

step() { echo "mcp-inspector: $*"; }
fail() { echo "mcp-inspector: FAIL: $*" >&2; exit 1; }

# The Inspector needs Node >= 22.19; take one from the registry when the system's is older.
if ! command -v node >/dev/null 2>&1 || ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>22||(a===22&&b>=19)?0:1)'; then
  if [ ! -x "$cache/node/node_modules/.bin/node" ]; then
    step "installing node@$NODE_VERSION into $cache/node"
    npm install --prefix "$cache/node" --no-audit --no-fund --silent "node@$NODE_VERSION"
  fi
  export PATH="$cache/node/node_modules/.bin:$PATH"
fi
if [ ! -x "$cache/inspector/node_modules/.bin/mcp-inspector" ] ||
   ! grep -q "\"version\": \"$INSPECTOR_VERSION\"" "$cache/inspector/node_modules/@modelcontextprotocol/inspector/package.json" 2>/dev/null; then
  step "installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION into $cache/inspector"
  npm install --prefix "$cache/inspector" --no-audit --no-fund --silent "@modelcontextprotocol/inspector@$INSPECTOR_VERSION"
fi
inspector="$cache/inspector/node_modules/.bin/mcp-inspector"

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

step "building agora"
# -trimpath and CGO_ENABLED=0 as make build: the same flags find its packages in Go's build
# cache, so this only links (without -trimpath every package compiles again, by its path).
CGO_ENABLED=0 go build -trimpath -o "$work/" ./cmd/agora ./cmd/agora-full ./cmd/agora-worker   # agora-full and the worker beside agora
agora=$work/agora
export AGORA_HOME=$work/agora-home
"$agora" init >/dev/null 2>&1 || fail "agora init"
DEMO_API_TOKEN=inspector-demo-value "$agora" apply -f examples/catalog/agora-manifest.yaml >/dev/null 2>&1 ||
  fail "agora apply of the example catalog"

# The Inspector keeps its own state under HOME; keep it out of the caller's.
export HOME=$work/home MCP_INSPECTOR_SECRET_STORE=memory
mkdir -p "$HOME"

# inspect RUN-ARGS...: runs the Inspector CLI, output in $work/out, stderr in $work/err, and
# its exit code in $rc.
inspect() {
  set +e
  "$inspector" --cli "$@" >"$work/out" 2>"$work/err"
  rc=$?
  set -e
}

# expect_tools FILE NAME...: the tools/list output in FILE names exactly the tools NAME....
expect_tools() {
  node -e '
    const got = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).tools.map(t => t.name).sort();
    const want = process.argv.slice(2).sort();
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      console.error("tools/list: got " + JSON.stringify(got) + "\n            want " + JSON.stringify(want));
      process.exit(1);
    }' "$1" "${@:2}"
}
all=(agora_capabilities_list agora_subagents_list agora_envs_list agora_dispatch agora_dispatch_describe
  agora_dispatch_cancel agora_orchestrator_submit agora_orchestrator_status agora_orchestrator_watch
  agora_orchestrator_schedules_list agora_orchestrator_schedule_show)
read_only=(agora_capabilities_list agora_subagents_list agora_envs_list agora_dispatch_describe
  agora_orchestrator_status agora_orchestrator_watch agora_orchestrator_schedules_list agora_orchestrator_schedule_show)

step "stdio: tools/list (--strict)"
inspect -e "AGORA_HOME=$AGORA_HOME" --method tools/list --strict "$agora" mcp
[ "$rc" = 0 ] || fail "stdio tools/list exited $rc: $(cat "$work/err")"
expect_tools "$work/out" "${all[@]}" || fail "stdio tools/list is not the eleven tools"

step "stdio: tools/call agora_capabilities_list"
inspect -e "AGORA_HOME=$AGORA_HOME" --method tools/call --tool-name agora_capabilities_list "$agora" mcp
[ "$rc" = 0 ] || fail "stdio agora_capabilities_list exited $rc: $(cat "$work/err")"
grep -q 'repo-tools' "$work/out" || fail "agora_capabilities_list does not list repo-tools: $(cat "$work/out")"

step "stdio: a read ceiling hides agora_dispatch"
inspect -e "AGORA_HOME=$AGORA_HOME" --method tools/list -- "$agora" mcp --ceiling read
[ "$rc" = 0 ] || fail "stdio --ceiling read tools/list exited $rc"
expect_tools "$work/out" "${read_only[@]}" || fail "a read client sees more than the read tools"
# The Inspector will not call a tool the server does not list (the Go tests call it directly
# and see the audited denial).
inspect -e "AGORA_HOME=$AGORA_HOME" --method tools/call --tool-name agora_dispatch --tool-arg subagent=hello -- "$agora" mcp --ceiling read
[ "$rc" = 5 ] || fail "agora_dispatch under a read ceiling exited $rc, want 5"
grep -q "not found on server" "$work/err" || fail "agora_dispatch under a read ceiling: $(tail -1 "$work/err")"

step "stdio: a mistyped AGORA_HOME is shown to the client, not as a closed connection"
inspect -e "AGORA_HOME=$work/mian" --method tools/call --tool-name agora_capabilities_list "$agora" mcp
grep -q "AGORA_HOME=$work/mian agora init" "$work/out" ||
  fail "a missing home: the client sees $(cat "$work/out") $(tail -1 "$work/err")"
[ ! -e "$work/mian" ] || fail "agora mcp created the missing home"

step "http: starting agora mcp --http 127.0.0.1:0"
token=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
AGORA_HTTP_TOKEN=$token "$agora" mcp --http 127.0.0.1:0 2>"$work/server.log" &
server_pid=$!
addr=""
for _ in $(seq 100); do
  addr=$(sed -n 's/.*"msg":"mcp server listening","addr":"\([^"]*\)".*/\1/p' "$work/server.log" | head -1)
  [ -n "$addr" ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "agora mcp --http exited: $(cat "$work/server.log")"
  sleep 0.1
done
[ -n "$addr" ] || fail "agora mcp --http did not listen"
url=http://$addr/mcp

step "http: tools/list (--strict)"
inspect "$url" --method tools/list --strict --header "Authorization: Bearer $token"
[ "$rc" = 0 ] || fail "http tools/list exited $rc: $(tail -1 "$work/err")"
expect_tools "$work/out" "${all[@]}" || fail "http tools/list is not the eleven tools"

step "http: tools/call agora_capabilities_list"
inspect "$url" --method tools/call --tool-name agora_capabilities_list --header "Authorization: Bearer $token"
[ "$rc" = 0 ] || fail "http agora_capabilities_list exited $rc: $(tail -1 "$work/err")"
grep -q 'repo-tools' "$work/out" || fail "agora_capabilities_list over http does not list repo-tools"

step "http: no token is refused"
inspect "$url" --method tools/list --stored-auth-only
[ "$rc" = 3 ] || fail "tools/list without a token exited $rc, want 3 (auth required)"

if grep -q "$token" "$work/server.log"; then fail "the server log holds the token"; fi
step "ok: the Inspector CLI $INSPECTOR_VERSION sees the eleven tools over stdio and http"
