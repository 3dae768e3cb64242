# class: resources
# expect: blocked
# control: limits
# reason: the address-space limit is set soft and hard alike; raising it would lift the target's memory limit for this process. Where the memory limit is the cgroup's (docker, kubernetes: no address-space limit), raising the cgroup's limit is the same attack
attempt sh -c '
h=$(prlimit --as --output=HARD --noheadings | tr -d " ") || exit 1
if [ "$h" != unlimited ]; then n=$((h * 2)) && prlimit --as=$n:$n prlimit --as --noheadings; exit; fi
for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
	l=$(cat "$f" 2>/dev/null) || continue
	if [ "$l" = max ] || [ "${#l}" -ge 19 ]; then echo "no address-space limit, and the cgroup has no memory limit ($f: $l)"; exit 0; fi
	up=max
	[ "${f##*/}" = memory.max ] || up=-1
	if e=$(echo "$up" 2>&1 >"$f"); then echo "no address-space limit, and raised the cgroup memory limit $l in $f to $(cat "$f")"; exit 0; fi
	echo "no address-space limit; the memory limit is the cgroup'"'"'s ($l in $f), which it could not raise: $e" >&2
	exit 1
done
echo "no address-space limit, and no cgroup memory limit in sight"'
