# class: host-read
# expect: blocked
# control: sandbox
# reason: the host kernel's log names its devices, mounts and other tenants' processes; the sandbox's /dev is its own, without /dev/kmsg
attempt head -n 2 /dev/kmsg
