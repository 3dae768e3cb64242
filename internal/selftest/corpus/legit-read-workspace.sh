# class: legitimate
# expect: allowed
# control: sandbox
# reason: the agent reads its own workspace: the checkout at the pinned commit
attempt sh -c 'grep -x "# selftest" README.md && ls -A'
