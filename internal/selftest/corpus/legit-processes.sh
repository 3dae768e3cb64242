# class: legitimate
# expect: allowed
# control: limits
# reason: the limits leave room for ordinary work: twenty processes at once
i=0
pids=""
while [ $i -lt 20 ]; do
	sleep 5 &
	pids="$pids $!"
	i=$((i + 1))
done
n=$(echo $pids | wc -w)
kill $pids 2>/dev/null
if [ "$n" -ge 20 ]; then report done "$n processes at once"; else report refused "$n processes"; fi
