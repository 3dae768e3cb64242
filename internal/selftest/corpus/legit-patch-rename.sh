# class: legitimate
# observe: patch selftest-renamed.md
# expect: allowed
# control: patch
# reason: a renamed file is in the dispatch's patch under its new name
attempt git mv README.md selftest-renamed.md
