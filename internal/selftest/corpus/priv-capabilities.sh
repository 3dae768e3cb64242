# class: privilege
# expect: blocked
# control: sandbox
# reason: every capability is dropped (--cap-drop ALL)
c=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
if [ "$c" = 0000000000000000 ]; then report refused "CapEff $c"; else report done "CapEff $c"; fi
