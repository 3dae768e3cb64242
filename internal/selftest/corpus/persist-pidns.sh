# class: persistence
# observe: process
# expect: blocked
# control: sandbox
# reason: a process in a PID namespace of its own is invisible to a kill(-1) in its parent's; making one needs CAP_SYS_ADMIN, and the sandbox's end takes every namespace under it
unshare -p -f sh -c 'i=0; while [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done' "agora-selftest-$nonce" </dev/null >/dev/null 2>&1 &
sleep 0.2
report done "tried to leave a process in a new PID namespace"
