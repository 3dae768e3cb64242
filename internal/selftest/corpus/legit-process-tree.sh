# class: legitimate
# observe: state finished
# expect: allowed
# control: sandbox
# reason: a tree of processes (children, grandchildren) that all end before the command does leaves a finished dispatch
(sleep 0.2; echo a >"$HOME/selftest-a") &
( (sleep 0.3; echo b >"$HOME/selftest-b") & (sleep 0.1; echo c >"$HOME/selftest-c") & wait) &
wait
if [ -f "$HOME/selftest-a" ] && [ -f "$HOME/selftest-b" ] && [ -f "$HOME/selftest-c" ]; then report done "three processes in two levels ran and ended"; else report refused "a child did not finish"; fi
