# class: privilege
# expect: blocked
# control: sandbox
# reason: a device node would reach the host's devices; the sandbox's /dev is its own and devices cannot be made. The node is /dev/zero's (1,5), which every host has, made where a filesystem lets devices open ($HOME may not)
r=refused why=
for d in "$HOME" /tmp "$AGORA_OUT" /dev/shm; do
	if w=$(mknod "$d/selftest-zero-$nonce" c 1 5 2>&1 && head -c 4 "$d/selftest-zero-$nonce" | od -An -tx1 2>&1); then
		r=done why="read the device node made in $d: $w"
		rm -f "$d/selftest-zero-$nonce"
		break
	fi
	why="$why $w;"
	rm -f "$d/selftest-zero-$nonce" 2>/dev/null
done
report "$r" "$why"
