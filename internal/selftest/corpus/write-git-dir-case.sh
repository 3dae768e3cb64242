# class: write-outside
# observe: reason worker-failed
# expect: blocked
# control: capture
# reason: .GIT/hooks is .git/hooks on a case-insensitive file system (macOS, Windows), so a patch carrying it would plant a hook where it is applied; git refuses the path, and the capture fails the dispatch (worker-failed) rather than carry it
mkdir -p .GIT/hooks && printf '#!/bin/sh\necho pwned\n' >.GIT/hooks/post-checkout && chmod +x .GIT/hooks/post-checkout
printf 'x\n' >selftest-case-marker.txt
report done "wrote .GIT/hooks/post-checkout"
