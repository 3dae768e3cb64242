# class: privilege
# expect: blocked
# control: sandbox
# reason: a new proc mount would show what the sandbox's /proc hides (and is how nested-container escapes start); mounting needs CAP_SYS_ADMIN
mkdir -p "$HOME/selftest-proc"
attempt sh -c 'mount -t proc proc "$1" && ls "$1" | head -3; r=$?; umount "$1" 2>/dev/null; exit $r' sh "$HOME/selftest-proc"
rmdir "$HOME/selftest-proc" 2>/dev/null
