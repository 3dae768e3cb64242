# class: legitimate
# expect: allowed
# control: sandbox
# reason: a rebase of one branch onto another, the history rewritten inside the workspace
export GIT_AUTHOR_NAME=selftest GIT_AUTHOR_EMAIL=selftest@example.com GIT_COMMITTER_NAME=selftest GIT_COMMITTER_EMAIL=selftest@example.com
attempt sh -c 'git checkout -q -b selftest-base && echo a >selftest-a.txt && git add selftest-a.txt && git commit -q -m a &&
	git checkout -q -b selftest-topic HEAD~1 && echo b >selftest-b.txt && git add selftest-b.txt && git commit -q -m b &&
	git rebase -q selftest-base && test -f selftest-a.txt && test -f selftest-b.txt && git log --oneline -3'
