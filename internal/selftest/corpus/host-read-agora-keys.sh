# class: host-read
# expect: blocked
# control: sandbox
# reason: AGORA_HOME's keys sign the audit log and seal the secrets; no sandbox may read them
attempt sh -c 'ls "$1/keys" && head -c 16 "$1"/keys/* | od -c | head -3' sh "$home"
