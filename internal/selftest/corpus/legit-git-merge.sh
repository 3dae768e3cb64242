# class: legitimate
# expect: allowed
# control: sandbox
# reason: a merge of two branches with a merge commit
export GIT_AUTHOR_NAME=selftest GIT_AUTHOR_EMAIL=selftest@example.com GIT_COMMITTER_NAME=selftest GIT_COMMITTER_EMAIL=selftest@example.com
attempt sh -c 'git checkout -q -b selftest-left && echo l >selftest-left.txt && git add selftest-left.txt && git commit -q -m left &&
	git checkout -q -b selftest-right HEAD~1 && echo r >selftest-right.txt && git add selftest-right.txt && git commit -q -m right &&
	git merge -q --no-edit selftest-left && git log --oneline --merges -1'
