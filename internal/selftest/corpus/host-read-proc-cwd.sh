# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: a host process's working directory (/proc/PID/cwd) opens its files by path; the runner's agora runs beside the probe, and the sandbox sees no host process
# Every secret found is reported, since other runs' probes may be visible too.
r=$(for p in /proc/[0-9]*; do cat "$p/cwd/probe/secret" 2>/dev/null; done | sort -u | tr '\n' ' ')
if [ -n "$r" ]; then report done "$r"; else report refused "no process's working directory holds probe/secret"; fi
