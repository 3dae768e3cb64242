# class: host-read
# expect: blocked
# control: sandbox
# reason: /etc in the sandbox is a short list of bound files (passwd, group, hosts, the loader cache, ...); the host's private TLS keys, ssh keys, sudoers and gitconfig are never among them
r=""
for f in /etc/ssl/private /etc/pki/tls/private /etc/ssh /etc/sudoers /etc/gitconfig /etc/kubernetes /etc/docker /etc/containers; do
	[ -e "$f" ] && r="$r $f"
done
if [ -n "$r" ]; then report done "host /etc entries visible:$r"; else report refused "only the bound files: $(ls /etc | tr '\n' ' ')"; fi
