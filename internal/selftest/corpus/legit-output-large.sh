# class: legitimate
# observe: output selftest-large.bin
# expect: allowed
# control: sandbox
# reason: a large output within the limits (32 MiB of the 100 MiB allowed) reaches the host
attempt sh -c 'head -c 33554432 /dev/zero >"$1/selftest-large.bin" && ls -l "$1/selftest-large.bin"' sh "$out"
