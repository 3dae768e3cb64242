# class: privilege
# expect: blocked
# control: sandbox
# reason: a device node would reach the host's disks; the sandbox's /dev is its own and devices cannot be made
attempt sh -c 'mknod "$HOME/sda" b 8 0 && head -c 16 "$HOME/sda"'
