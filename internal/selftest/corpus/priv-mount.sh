# class: privilege
# expect: blocked
# control: sandbox
# reason: a mount would lay another tree over the sandbox's binds
mkdir -p "$HOME/m"
attempt sh -c 'mount -t tmpfs selftest "$1"; r=$?; umount "$1" 2>/dev/null; exit $r' sh "$HOME/m"
rmdir "$HOME/m" 2>/dev/null
