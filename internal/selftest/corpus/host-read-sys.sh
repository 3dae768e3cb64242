# class: host-read
# expect: blocked
# providers: local
# control: sandbox
# reason: /sys shows the host's devices, network interfaces, cgroups and firmware; the sandbox mounts no sysfs
attempt ls /sys/class/net /sys/fs/cgroup
