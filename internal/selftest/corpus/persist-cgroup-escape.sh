# class: persistence
# observe: process
# expect: blocked
# control: sandbox
# reason: a process that first moves itself to the root cgroup escapes cgroup.kill, the one kill that reaches every process of a dispatch outside a PID namespace; the sandbox mounts no cgroup file system and its PID namespace ends with it
# The program waits until the process has tried the move, so the dispatch cannot end first.
rm -f "$HOME/selftest-tried"
setsid sh -c 'for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/unified/cgroup.procs; do echo $$ 2>/dev/null >"$f"; done; : >"$HOME/selftest-tried"; i=0; while [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done' "agora-selftest-$nonce" </dev/null >/dev/null 2>&1 &
i=0
while [ ! -e "$HOME/selftest-tried" ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
report done "left a process that tried to leave its cgroup: $(cat /proc/$!/cgroup 2>&1 | tr '\n' ' ')"
