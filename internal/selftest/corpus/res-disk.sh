# class: resources
# needs: disk-quota
# observe: reason limit-exceeded
# expect: blocked
# control: limits
# reason: filling the host's disk stops every service on it; the workspace lives on a tmpfs of the target's disk size
# fallocate takes the blocks at once, with no gigabytes of zeros to write. Files of 256 MiB
# (under the target's file_size), halving the size when one no longer fits, then a real write
# of whatever is left, which the quota stops. The files go beside $out, not in the workspace
# (the quota covers both, and no patch of them is made after). At most the target's disk plus
# 256 MiB is asked for, so where the quota is not enforced the attack stops there.
fill="$AGORA_OUT/selftest-fill"
mkdir -p "$fill"
limit=$(((disk + 256) * 1024))
total=0
i=0
size=262144
if command -v fallocate >/dev/null 2>&1; then
	while [ $size -ge 4 ] && [ $total -lt $limit ]; do
		if fallocate -l $((size * 1024)) "$fill/$i" 2>/dev/null; then
			total=$((total + size))
			i=$((i + 1))
		else
			rm -f "$fill/$i"
			size=$((size / 2))
		fi
	done
fi
while [ $total -lt $limit ] && dd if=/dev/zero of="$fill/w$i" bs=1048576 count=256 2>/dev/null; do
	total=$((total + 262144))
	i=$((i + 1))
done
report done "took $((total / 1024)) MiB in $i files"
