# class: legitimate
# expect: allowed
# control: sandbox
# reason: the workspace's .git holds the pinned commit's history: log, show and blame read it
attempt sh -c 'git log --oneline -1 && git show --stat --oneline HEAD | head -3 && git blame README.md | head -1'
