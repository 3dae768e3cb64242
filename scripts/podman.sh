#!/usr/bin/env bash
# Stands up podman's Docker-compatible API for agora's container provider and its tests:
# installs podman when missing (root, apt-get), writes the containers.conf this kind of host
# needs, starts `podman system service` on a Unix socket when nothing answers there, and
# prints the DOCKER_HOST line to use; with gVisor installed, a second service whose default
# runtime is runsc, printed as DOCKER_HOST_RUNSC. Idempotent: run it as often as you like.
#
# Why each setting (see /work/shared/research/kubernetes-here.md):
#   default_ulimits  root here lacks CAP_SYS_RESOURCE, so the runtime cannot raise rlimits
#                    above the host's; without these every create fails with
#                    "error setting rlimit type 7: operation not permitted".
#   cgroup_manager   no systemd on these hosts.
#   events_logger    no journald either.
#   runtime          runc: crun refuses cgroup v1 hybrid hosts ("cgroups in hybrid mode not
#                    supported"); scripts/podman.sh installs runc when missing.
#   runsc            gVisor (on PATH, or built by scripts/gvisor-tools.sh), registered under
#                    the name agora's `runtime: runsc` asks for; its own network stack is off
#                    (--network=none) because agora's containers have no network and runsc's
#                    netstack setup fails here; --host-uds=open lets a warm slot connect to
#                    the gateway's socket bound into it.
set -euo pipefail

sock=${AGORA_PODMAN_SOCK:-/run/agora-podman.sock}
rsock=${AGORA_PODMAN_RUNSC_SOCK:-/run/agora-podman-runsc.sock}
conf=/etc/containers/containers.conf
marker="# written by agora scripts/podman.sh"
log=${AGORA_PODMAN_LOG:-/run/agora-podman.log}

if ! command -v podman >/dev/null; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "agora podman: podman is missing; install it with: sudo apt-get install -y podman" >&2
    exit 2
  fi
  echo "agora podman: installing podman (apt-get, as root)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman >&2
fi

if ! command -v runc >/dev/null; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "agora podman: runc is missing; install it with: sudo apt-get install -y runc" >&2
    exit 2
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc >&2
fi

runtimes=
# runsc from PATH, else the one scripts/gvisor-tools.sh builds for the real node (.ci/run
# builds it before this script runs), so the docker provider's gVisor tests run in CI too.
runsc_bin=$(command -v runsc || true)
built="$(cd "$(dirname "$0")/.." && pwd)/.cache/gvisor/bin/runsc"
if [ -z "$runsc_bin" ] && [ -x "$built" ]; then
  runsc_bin=$built
fi
if [ -n "$runsc_bin" ]; then
  wrapper=/usr/local/lib/agora/runsc
  mkdir -p "$(dirname "$wrapper")"
  cat >"$wrapper.tmp" <<WRAP
#!/bin/sh
# agora: gVisor with its network stack off (agora's containers have none), and host Unix
# sockets bound into a container open to it: a warm slot's worker reaches agora's gateway
# only through the gateway's socket bound read-only into its container (runsc's default
# refuses it, and the slot never claims).
exec $runsc_bin --network=none --host-uds=open "\$@"
WRAP
  chmod 0755 "$wrapper.tmp"
  mv "$wrapper.tmp" "$wrapper"
  runtimes="
[engine.runtimes]
runsc = [\"$wrapper\"]"
fi

want="$marker
[containers]
default_ulimits = [\"nofile=1024:1024\", \"nproc=4096:4096\"]

[engine]
cgroup_manager = \"cgroupfs\"
runtime = \"runc\"
events_logger = \"file\"
$runtimes"

if [ -e "$conf" ] && ! grep -qxF "$marker" "$conf"; then
  echo "agora podman: $conf exists and was not written by this script; leaving it alone." >&2
  echo "agora podman: it needs: default_ulimits, cgroup_manager = \"cgroupfs\", runtime = \"runc\", events_logger = \"file\"" >&2
else
  mkdir -p "$(dirname "$conf")"
  if [ ! -e "$conf" ] || [ "$(cat "$conf")" != "$want" ]; then
    printf '%s\n' "$want" >"$conf.tmp" && mv "$conf.tmp" "$conf"
    restart=1
  fi
fi

# answers SOCK: podman's API answers on SOCK.
answers() {
  [ -S "$1" ] && podman --url "unix://$1" version >/dev/null 2>&1
}

# serve SOCK [CONF]: run `podman system service` on SOCK (with CONF as its only
# containers.conf when given) unless one answers there already with the current settings.
serve() {
  local s=$1 c=${2:-}
  if [ -n "${restart:-}" ] && answers "$s" && [ -f "$s.pid" ]; then
    # The service read the old configuration: restart the one this script started.
    kill "$(cat "$s.pid")" 2>/dev/null || true
    sleep 1
  fi
  answers "$s" && return 0
  rm -f "$s"
  # From /: conmon leaves files such as "oom" (a container the kernel OOM-killed) in the
  # service's working directory, which must not be a checkout.
  cd /
  if [ -n "$c" ]; then
    CONTAINERS_CONF=$c nohup podman system service --time=0 "unix://$s" >>"$log" 2>&1 </dev/null &
  else
    nohup podman system service --time=0 "unix://$s" >>"$log" 2>&1 </dev/null &
  fi
  echo $! >"$s.pid"
  for _ in $(seq 1 100); do
    answers "$s" && return 0
    sleep 0.1
  done
  echo "agora podman: podman system service did not answer on $s; see $log" >&2
  exit 1
}

serve "$sock"
echo "DOCKER_HOST=unix://$sock"

# podman's Docker API ignores a container's HostConfig.Runtime: the runtime is the
# service's default. A second service whose default is gVisor serves `runtime: runsc`
# targets (agora checks the runtime each container really got, and refuses a mismatch).
if [ -n "$runtimes" ]; then
  rconf=/etc/containers/agora-runsc.conf
  rwant="${want/runtime = \"runc\"/runtime = \"runsc\"}"
  if [ ! -e "$rconf" ] || [ "$(cat "$rconf")" != "$rwant" ]; then
    printf '%s\n' "$rwant" >"$rconf.tmp" && mv "$rconf.tmp" "$rconf"
    restart=1
  fi
  serve "$rsock" "$rconf"
  echo "DOCKER_HOST_RUNSC=unix://$rsock"
fi
