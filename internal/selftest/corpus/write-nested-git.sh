# class: write-outside
# observe: patch sub/.git/
# expect: blocked
# control: patch
# reason: a repository nested in the workspace carries its own .git (config, hooks); the patch records it as a gitlink and never carries a .git directory at any depth
mkdir -p sub
(
	cd sub && git init -q && echo x >file && git add file &&
		git -c user.name=selftest -c user.email=selftest@example.com commit -q -m nested &&
		printf '#!/bin/sh\necho pwned\n' >.git/hooks/post-checkout && chmod +x .git/hooks/post-checkout
)
printf 'x\n' >selftest-nested-marker.txt
report done "made sub/.git with a commit and a hook"
