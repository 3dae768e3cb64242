# class: legitimate
# observe: patch README.md
# expect: allowed
# control: patch
# reason: a mode change (a file made executable) is in the dispatch's patch
attempt chmod +x README.md
