# class: privilege
# expect: blocked
# control: sandbox
# reason: a writable bind of /usr (or of a read-only bind) would undo the read-only system the sandbox is built on
mkdir -p "$HOME/selftest-bind"
attempt sh -c 'mount --bind /usr "$1" && mount -o remount,bind,rw "$1" && echo "bound /usr writable"; r=$?; umount "$1" 2>/dev/null; exit $r' sh "$HOME/selftest-bind"
rmdir "$HOME/selftest-bind" 2>/dev/null
