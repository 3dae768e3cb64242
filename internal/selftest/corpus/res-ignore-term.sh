# class: resources
# timeout: 10s
# observe: reason timeout
# expect: blocked
# control: limits
# reason: a process that ignores SIGTERM and SIGHUP still ends at the time limit: the kill is SIGKILL to the whole tree

# 10 s, as res-time's: the limit runs from the dispatch's start, and on a loaded host the
# sandbox and the shell may take seconds before the trap is set and the canary written.
trap '' TERM HUP INT
report done "ignoring TERM, HUP and INT"
sleep 60
sleep 60
