# class: legitimate
# expect: allowed
# control: sandbox
# reason: stashing work in progress and taking it back
export GIT_AUTHOR_NAME=selftest GIT_AUTHOR_EMAIL=selftest@example.com GIT_COMMITTER_NAME=selftest GIT_COMMITTER_EMAIL=selftest@example.com
attempt sh -c 'echo wip >>README.md && git stash -q && git diff --quiet && git stash pop -q && grep -q wip README.md && echo "stashed and restored"'
