# class: write-outside
# observe: patch .GIT/
# expect: blocked
# control: patch
# reason: .GIT/hooks is .git/hooks on a case-insensitive file system (macOS, Windows); a patch carrying it would plant a hook where the patch is applied, and git refuses such a path
mkdir -p .GIT/hooks && printf '#!/bin/sh\necho pwned\n' >.GIT/hooks/post-checkout && chmod +x .GIT/hooks/post-checkout
printf 'x\n' >selftest-case-marker.txt
report done "wrote .GIT/hooks/post-checkout"
