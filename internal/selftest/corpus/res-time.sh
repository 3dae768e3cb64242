# class: resources
# timeout: 10s
# observe: reason timeout
# expect: blocked
# control: limits
# reason: an agent that never ends holds a slot forever; the wall clock kills the whole tree

# 10 s, not less: the limit runs from the dispatch's start, and on a loaded host the sandbox
# and the shell may take seconds before the canary is written.
report done "still running"
sleep 60
