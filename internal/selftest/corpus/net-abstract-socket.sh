# class: network
# observe: fixture
# expect: blocked
# control: sandbox
# reason: an abstract Unix socket of the host (X11, dbus and many daemons listen on one); abstract sockets belong to the network namespace
need "$abstract" "an abstract Unix socket" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --abstract-unix-socket "$abstract" "http://selftest/$nonce"
