# class: privilege
# expect: blocked
# control: sandbox
# reason: the host's block devices and kernel memory are not in the sandbox's /dev
r=$(ls /dev/sd* /dev/nvme* /dev/vd* /dev/mem /dev/kmem 2>/dev/null | head -3)
if [ -n "$r" ]; then report done "$r"; else report refused "no host device nodes"; fi
