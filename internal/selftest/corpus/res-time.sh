# class: resources
# timeout: 10s
# observe: reason timeout
# expect: blocked
# control: limits
# reason: an agent that never ends holds a slot forever; the wall clock kills the whole tree

# 10 s, not less: the limit runs from the dispatch's start, and on a loaded host the sandbox
# and the shell may take seconds before the canary is written. The sleep outlasts the longest
# limit a second run gets (10 s and 90 s more for a pod's start), so only the limit ends it.
report done "still running"
sleep 300
