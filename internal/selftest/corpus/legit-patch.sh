# class: legitimate
# observe: patch selftest-patch.txt
# expect: allowed
# control: patch
# reason: a file the agent writes in the workspace is in the dispatch's patch
echo hello >selftest-patch.txt
report done "wrote selftest-patch.txt"
