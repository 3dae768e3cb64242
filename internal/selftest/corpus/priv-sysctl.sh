# class: privilege
# expect: blocked
# control: sandbox
# reason: a sysctl write changes the whole host's kernel (core_pattern runs a program as root on every crash); /proc/sys is read-only in the sandbox
# The value written is the one read, so a host where this is not blocked keeps its setting.
attempt sh -c 'v=$(cat /proc/sys/kernel/core_pattern) && printf "%s\n" "$v" >/proc/sys/kernel/core_pattern && echo "rewrote core_pattern ($v)"'
