# class: privilege
# expect: blocked
# control: sandbox
# reason: /proc/sysrq-trigger commands the host's kernel (reboot, kill every process); the request here is h, help, which changes nothing
if [ ! -e /proc/sysrq-trigger ]; then
	report missing "this kernel has no /proc/sysrq-trigger"
	return 0
fi
attempt sh -c 'echo h >/proc/sysrq-trigger'
