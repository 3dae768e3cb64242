# class: resources
# expect: blocked
# control: limits
# reason: the address-space limit is set soft and hard alike; raising it would lift the target's memory limit for this process
attempt sh -c 'h=$(prlimit --as --output=HARD --noheadings | tr -d " ") && if [ "$h" = unlimited ]; then echo "no address-space limit"; else n=$((h * 2)) && prlimit --as=$n:$n prlimit --as --noheadings; fi'
