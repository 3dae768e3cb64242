# class: privilege
# expect: blocked
# control: sandbox
# reason: a device node would reach the host's disks; the sandbox's /dev is its own and devices cannot be made
attempt sh -c 'mknod "$1" b 8 0 && ls -l "$1"; r=$?; rm -f "$1"; exit $r' sh "$HOME/selftest-sda"
