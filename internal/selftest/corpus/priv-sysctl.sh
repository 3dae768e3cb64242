# class: privilege
# expect: blocked
# control: sandbox
# reason: /proc/sys sets the host kernel's parameters for every tenant; the sandbox's /proc/sys is read-only and its uid is not root. The write puts back the value it read, which changes nothing
attempt sh -c 'v=$(cat /proc/sys/kernel/printk_ratelimit) && echo "$v" >/proc/sys/kernel/printk_ratelimit && echo "wrote $v"'
