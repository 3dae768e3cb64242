# class: resources
# observe: logs 5MiB
# expect: blocked
# control: limits
# reason: standard output is host disk and the log reader's memory; the host keeps the first 4 MiB and drops the rest, however much the agent writes
head -c 16777216 /dev/zero | tr '\0' x | fold -w 1024
report done "wrote 16 MiB to standard output"
