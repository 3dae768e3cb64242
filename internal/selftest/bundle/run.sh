#!/bin/sh
# run.sh: runs one attack of agora's selftest corpus (docs/selftest.md). The dispatch input
# names the attack and carries the run's values; the attack's program is sourced from
# attacks/<id>.sh after the canary is written, so a dispatch that never reached the program
# leaves no canary and the runner counts it as not run, never as blocked.
set -u

field() {
	printf '%s' "$AGORA_INPUT_JSON" | sed -n "s/.*\"$1\":\"\([^\"\\\\]*\)\".*/\1/p"
}

attack=$(field attack)
nonce=$(field nonce)
home=$(field home)
probe=$(field probe)
port=$(field port)
worker=$(field worker)
memory=$(field memory)
disk=$(field disk)
provider=$(field provider)
# The runner's host-side fixtures (docs/selftest.md): a listener on the host's IPv6
# loopback, a DNS resolver on its loopback, the granted host (ADDRESS:PORT; over TLS on two
# more ports), a Unix socket of the host and an abstract one; empty when this host cannot
# give one.
port6=$(field port6)
dnsport=$(field dnsport)
granted=$(field granted)
granted_tls=$(field granted_tls)
granted_tls2=$(field granted_tls2)
sock=$(field sock)
abstract=$(field abstract)
mark="mark-$nonce"
# The model gateway's socket, beside the capability files (model runtimes only); empty when
# this dispatch has none.
gwsock="${AGORA_CAPABILITIES%/*}/gateway/gateway.sock"
[ -S "$gwsock" ] || gwsock=
here="$AGORA_CAPABILITIES/selftest"
out="$AGORA_OUT/outputs"
mkdir -p "$out"
printf '%s\n' "$nonce" >"$out/canary"
# The same canary on standard output: the dispatch's log keeps it when an attack that fills
# the disk leaves no outputs.
printf 'selftest canary %s\n' "$nonce"

# report WHAT EVIDENCE records the program's own account: done (the operation took effect)
# or refused (it failed), with what the operation said; missing when a tool it needs is not
# installed, which the runner reports as not run.
report() {
	printf '%s\t%s\n' "$1" "$(printf '%s' "$2" | tr '\n\t' '  ' | cut -c1-400)" >"$out/report"
}

# missing TOOL [WHERE] reports that TOOL, which the attack needs, is not installed (not run),
# and where it would come from: on bubblewrap the sandbox's tools are this host's (its /usr),
# on docker and kubernetes the target's image's. WHERE says where the attack looked.
missing() {
	case "$provider" in
	docker | kubernetes) report missing "$1 is not installed in the sandbox: it is missing in the target's image${2:+ $2}" ;;
	*) report missing "$1 is not installed in the sandbox: it is missing on this host${2:+ $2}" ;;
	esac
}

# attempt CMD... runs CMD: done with its output when it succeeds, refused with its error when
# it fails; missing when CMD is not installed.
attempt() {
	if ! command -v "$1" >/dev/null 2>&1; then
		missing "$1"
		return
	fi
	if r=$("$@" 2>&1); then
		report done "$r"
	else
		report refused "$r"
	fi
}

# offhost CMD... is attempt for a connection that leaves the host: when it fails on a local
# target whose sandbox has an interface besides loopback (none, or the host's network), what
# stopped it is this host's network (no route, no IPv6, no resolver that answers), not the
# sandbox, and the program reports missing (not run), never refused. A container's or a
# pod's interface is its own, behind its provider's network control.
offhost() {
	attempt "$@"
	case "$provider $(cat "$out/report")" in
	"local refused"*)
		ifs=$(grep ':' /proc/net/dev | cut -d: -f1 | tr -d ' ' | grep -vx lo | tr '\n' ' ')
		[ -z "$ifs" ] || report missing "this host's network did not reach it either (interfaces besides loopback: $ifs): $(cut -f2 "$out/report")"
		;;
	esac
}

# need VALUE WHAT reports missing (not run) when the runner could not give VALUE here; use
# it as "need "$x" what || return 0".
need() {
	[ -n "$1" ] && return 0
	report missing "$2 is not available on this host"
	return 1
}

case "$attack" in
*[!a-z0-9-]* | "")
	report refused "bad attack id"
	exit 2
	;;
esac
. "$here/attacks/$attack.sh"
