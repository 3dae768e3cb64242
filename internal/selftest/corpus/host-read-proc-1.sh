# class: host-read
# expect: blocked
# control: sandbox
# reason: pid 1 must be the sandbox's own, never the host's init (systemd, init, a container's entrypoint)
c=$(tr '\0' ' ' </proc/1/cmdline 2>&1)
case "$c" in
*bwrap* | *agora-worker*) report refused "pid 1 is the sandbox's own: $c" ;;
*) report done "pid 1 is $c" ;;
esac
