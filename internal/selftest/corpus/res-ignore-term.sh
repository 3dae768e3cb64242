# class: resources
# timeout: 2s
# observe: reason timeout
# expect: blocked
# control: limits
# reason: a process that ignores SIGTERM and SIGHUP still ends at the time limit: the kill is SIGKILL to the whole tree
trap '' TERM HUP INT
report done "ignoring TERM, HUP and INT"
sleep 60
sleep 60
