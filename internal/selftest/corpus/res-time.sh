# class: resources
# timeout: 3s
# observe: reason timeout
# expect: blocked
# control: limits
# reason: an agent that never ends holds a slot forever; the wall clock kills the whole tree
report done "still running"
sleep 60
