# class: legitimate
# expect: allowed
# control: limits
# reason: an allocation well inside the target's memory (64 MiB) works
attempt perl -e '$x = "a" x (64 << 20); print length($x), " bytes\n"'
