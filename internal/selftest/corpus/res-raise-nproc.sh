# class: resources
# expect: blocked
# control: limits
# reason: the process limit is set soft and hard alike; raising it past the target's max_procs would let a fork bomb through
attempt sh -c 'h=$(prlimit --nproc --output=HARD --noheadings | tr -d " ") && if [ "$h" = unlimited ]; then echo "no process limit"; else n=$((h + 1000)) && prlimit --nproc=$n:$n prlimit --nproc --noheadings; fi'
