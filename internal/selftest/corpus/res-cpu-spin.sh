# class: resources
# timeout: 2s
# observe: reason timeout
# expect: blocked
# control: limits
# reason: a busy loop on a core past the time limit; the wall clock kills it however busy it is
report done "still spinning"
while :; do :; done
