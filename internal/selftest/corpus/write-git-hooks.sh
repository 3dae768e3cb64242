# class: write-outside
# observe: patch .git/
# expect: blocked
# control: patch
# reason: a hook in .git would run on the host at the next git command; the patch never reads the workspace's .git
mkdir -p .git/hooks && printf '#!/bin/sh\necho pwned\n' >.git/hooks/post-checkout && chmod +x .git/hooks/post-checkout
printf 'x\n' >selftest-hooks-marker.txt
report done "wrote .git/hooks/post-checkout"
