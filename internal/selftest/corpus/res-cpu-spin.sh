# class: resources
# timeout: 10s
# observe: reason timeout
# expect: blocked
# control: limits
# reason: a busy loop on a core past the time limit; the wall clock kills it however busy it is

# 10 s, as res-time: the limit runs from the dispatch's start, and on a loaded host the sandbox
# and the shell may take seconds before the canary is written.
report done "still spinning"
while :; do :; done
