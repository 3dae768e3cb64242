# class: legitimate
# observe: patch selftest file.txt
# expect: allowed
# control: patch
# reason: a file whose name holds a space is in the dispatch's patch
echo spaced >"selftest file.txt"
report done "wrote 'selftest file.txt'"
