# class: host-read
# expect: blocked
# control: sandbox
# reason: agora.db holds every record and the sealed secrets
attempt head -c 16 "$home/agora.db"
