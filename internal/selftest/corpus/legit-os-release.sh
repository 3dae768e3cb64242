# class: legitimate
# expect: allowed
# control: sandbox
# reason: a tool reads the OS it runs on: /etc/os-release, else /usr/lib/os-release (os-release(5)); the sandbox binds /usr and only part of /etc
f=/etc/os-release
[ -r "$f" ] || f=/usr/lib/os-release
attempt grep -m1 '^PRETTY_NAME=\|^NAME=' "$f"
