# class: host-read
# expect: blocked
# control: sandbox
# reason: no host socket (ssh-agent, docker, podman, dbus) is reachable from the sandbox
r=$(find / -xdev -type s 2>/dev/null | grep -v '^/agora/' | head -5)
if [ -n "$r" ]; then report done "$r"; else report refused "no socket outside /agora"; fi
