# class: host-read
# expect: blocked
# control: sandbox
# reason: the kernel's symbol addresses (/proc/kallsyms) undo KASLR, the first step of a kernel exploit; they show only to CAP_SYSLOG, which the sandbox lacks, and read as zeros otherwise
a=$(head -1 /proc/kallsyms 2>&1)
case "$a" in
0000000000000000\ * | 00000000\ *) report refused "addresses hidden: $a" ;;
[0-9a-f]*) report done "$a" ;;
*) report refused "$a" ;;
esac
