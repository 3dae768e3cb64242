# class: host-read
# expect: blocked
# control: sandbox
# reason: AGORA_HOME's directory names every dispatch, blob and key file; its listing is the map to everything else
attempt ls -la "$home"
