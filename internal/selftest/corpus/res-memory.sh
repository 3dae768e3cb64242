# class: resources
# expect: blocked
# control: limits
# reason: one allocation past the target's memory: the address-space limit refuses it before any page is touched
attempt perl -e '$n = shift; $x = "a" x $n; print length($x), "\n"' "$memory"
