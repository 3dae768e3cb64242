# class: resources
# expect: blocked
# control: limits
# reason: a fork bomb starves the host; the process limit (max_procs, pids.max) stops it
# The shell dies at the first fork it cannot make, so the report is written before every
# fork, with builtins only: the last one says how far it got.
(
	i=0
	while [ $i -lt 2000 ]; do
		echo "refused	fork failed after $i processes" >"$out/report"
		sleep 20 &
		i=$((i + 1))
	done
	echo "done	$i processes" >"$out/report"
) 2>/dev/null
exit 0
