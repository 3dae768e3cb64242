# class: privilege
# expect: blocked
# control: sandbox
# reason: /dev/kmsg is the kernel's log (addresses, other tenants' messages) and a way to forge it; the sandbox's /dev has no such node
attempt sh -c 'ls -l /dev/kmsg && dd if=/dev/kmsg bs=8192 count=1 2>/dev/null | head -c 120'
