# class: host-read
# expect: blocked
# control: sandbox
# reason: a docker or podman socket is root on the host: whoever reaches it starts a privileged container; no engine socket exists in the sandbox
r=""
for s in /run/docker.sock /var/run/docker.sock /run/podman/podman.sock /run/containerd/containerd.sock /run/*.sock /run/user/*/podman/podman.sock /run/user/*/docker.sock; do
	[ -S "$s" ] && r="$r $s"
done
if [ -n "$r" ]; then report done "engine sockets reachable:$r"; else report refused "no engine socket in the sandbox"; fi
