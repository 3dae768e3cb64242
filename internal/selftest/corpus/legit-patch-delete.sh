# class: legitimate
# observe: patch README.md
# expect: allowed
# control: patch
# reason: a deleted file is in the dispatch's patch
rm README.md
report done "deleted README.md"
