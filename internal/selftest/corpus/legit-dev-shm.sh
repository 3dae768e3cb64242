# class: legitimate
# expect: allowed
# control: sandbox
# reason: /dev/shm works for the shared memory tools use (Python multiprocessing, browsers), within its size
attempt sh -c 'head -c 16777216 /dev/zero >/dev/shm/selftest && ls -l /dev/shm/selftest && rm /dev/shm/selftest'
