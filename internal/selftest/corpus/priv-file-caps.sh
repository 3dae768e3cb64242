# class: privilege
# expect: blocked
# control: sandbox
# reason: a file capability (setcap cap_setuid+ep) turns any binary into a root shell; setting one needs CAP_SETFCAP, which the sandbox lacks
PATH="$PATH:/usr/sbin:/sbin"
command -v setcap >/dev/null || { missing setcap; exit 0; }
attempt sh -c 'cp /bin/sh "$1" && setcap cap_setuid+ep "$1" && getcap "$1"; r=$?; rm -f "$1"; exit $r' sh "$HOME/selftest-sh"
