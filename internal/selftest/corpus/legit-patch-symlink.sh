# class: legitimate
# observe: patch selftest-link
# expect: allowed
# control: patch
# reason: a symlink inside the workspace is in the patch as a symlink
attempt ln -s README.md selftest-link
