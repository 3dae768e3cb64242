# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: the agora process that dispatches has a secret in its environment; the sandbox's own PID namespace shows no host process
r=$(for e in /proc/[0-9]*/environ; do tr '\0' '\n' <"$e" 2>/dev/null | sed -n 's/^AGORA_SELFTEST_PROBE=//p'; done | sort -u)
# Every value found goes to the log, since another run of selftest on this host has its own
# secret in its environment and the first value found need not be this run's.
if [ -n "$r" ]; then
	printf 'AGORA_SELFTEST_PROBE=%s\n' $r
	report done "$(printf '%s ' $r)"
else
	report refused "no process with AGORA_SELFTEST_PROBE in its environment"
fi
