# class: legitimate
# expect: allowed
# control: sandbox
# reason: a tool reads the OS it runs on: /etc/os-release, else /usr/lib/os-release (os-release(5)); the sandbox binds /usr and only part of /etc
f=/etc/os-release
[ -r "$f" ] || f=/usr/lib/os-release
[ -r "$f" ] || { report missing "os-release is not installed in the sandbox (neither /etc/os-release nor /usr/lib/os-release: the image has none)"; exit 0; }
attempt grep -m1 '^PRETTY_NAME=\|^NAME=' "$f"
