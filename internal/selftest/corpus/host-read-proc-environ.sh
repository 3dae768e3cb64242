# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: the agora process that dispatches has a secret in its environment; the sandbox's own PID namespace shows no host process
# Every secret found is reported, since other runs' agora processes may be visible too.
r=$(for e in /proc/[0-9]*/environ; do tr '\0' '\n' <"$e" 2>/dev/null | sed -n 's/^AGORA_SELFTEST_PROBE=//p'; done | sort -u | tr '\n' ' ')
if [ -n "$r" ]; then report done "$r"; else report refused "no process with AGORA_SELFTEST_PROBE in its environment"; fi
