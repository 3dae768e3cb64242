# class: resources
# expect: blocked
# control: limits
# reason: /dev/shm is tmpfs, host memory the address-space limit does not count; the sandbox's is sized (at most 256 MiB), so filling it stops there
attempt sh -c 'dd if=/dev/zero of=/dev/shm/selftest-fill bs=1048576 count=257 2>&1 | tail -1; s=$(du -m /dev/shm/selftest-fill | cut -f1); rm -f /dev/shm/selftest-fill; echo "wrote $s MiB"; [ "$s" -ge 257 ]'
