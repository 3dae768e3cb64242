# class: write-outside
# observe: patch sub/.git/
# expect: blocked
# control: patch
# reason: a repository nested in the workspace carries its own .git (config, hooks); the patch must never carry a .git directory at any depth
mkdir -p sub && (cd sub && git init -q && mkdir -p .git/hooks && printf '#!/bin/sh\necho pwned\n' >.git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && echo x >file)
printf 'x\n' >selftest-nested-marker.txt
report done "made sub/.git with a hook"
