# class: legitimate
# expect: allowed
# control: sandbox
# reason: make runs a small build: a target from its prerequisite, then a second run that finds it up to date
command -v make >/dev/null || { missing make; exit 0; }
mkdir -p selftest-make && cd selftest-make
echo hello >in.txt
printf 'out.txt: in.txt\n\ttr a-z A-Z <in.txt >out.txt\n\nclean:\n\trm -f out.txt\n' >Makefile
attempt sh -c 'make -s && grep -qx HELLO out.txt && make -q out.txt && echo "built out.txt, then up to date"'
