# class: resources
# needs: disk-quota
# observe: reason limit-exceeded
# expect: blocked
# control: limits
# reason: filling the host's disk stops every service on it; the workspace lives on a tmpfs of the target's disk size
# Files of 256 MiB each stay under the target's file_size, so the quota is what stops them.
i=0
while [ $i -le $((disk / 256 + 1)) ]; do
	dd if=/dev/zero of="selftest-fill-$i" bs=1048576 count=256 2>/dev/null || break
	i=$((i + 1))
done
report done "wrote $i files of 256 MiB"
