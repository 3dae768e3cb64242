# class: legitimate
# observe: patch selftest.bin
# expect: allowed
# control: patch
# reason: a binary file is in the dispatch's patch (git diff --binary)
head -c 4096 /dev/urandom >selftest.bin
report done "wrote 4096 random bytes to selftest.bin"
