#!/usr/bin/env bash
# What `make demo` needs besides Go: bubblewrap runs the sandbox, git makes workspaces and
# patches. When one is missing and this shell may install packages (root, or passwordless
# sudo, with apt-get), it installs them and says so; otherwise it prints the exact command and
# exits 2. scripts/demo.sh runs it first; scripts/prereqs_test.go runs it alone, with stubs.
set -euo pipefail

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v git >/dev/null || need+=(git)
[ ${#need[@]} -eq 0 ] && exit 0

# sudo -n never prompts: a sudo that wants a password counts as none.
why=
if ! command -v apt-get >/dev/null; then
  why="apt-get not found"
elif [ "$(id -u)" != 0 ] && ! { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
  why="not root, and no passwordless sudo"
fi
if [ -n "$why" ]; then
  echo "agora demo: ${need[*]} needed ($why); install with:" >&2
  echo "  sudo apt-get install -y ${need[*]}" >&2
  exit 2
fi

if [ "$(id -u)" = 0 ]; then
  printf '\n== installing %s (apt-get, as root)\n' "${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
else
  printf '\n== installing %s (sudo apt-get)\n' "${need[*]}"
  sudo -n apt-get update -qq
  sudo -n DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
