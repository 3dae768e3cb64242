# class: legitimate
# observe: state finished
# expect: allowed
# control: sandbox
# reason: a command that prints a lot (2 MiB, under the 4 MiB log) and exits 0 leaves a finished dispatch
head -c 2097152 /dev/zero | tr '\0' 'x' | fold -w 100
report done "printed 2 MiB"
