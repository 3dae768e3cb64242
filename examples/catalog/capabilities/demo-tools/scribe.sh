#!/bin/sh
# scribe: the make demo plan's worker. Its input names a file and the task it works for
# ({"file": "docs/GREETING.md", "task": "greet-docs"}); it appends the greeting ($GREETING,
# from the demo env bundle) and the time it started and ended (UTC, milliseconds), working
# for a second in between. Two tasks whose times overlap ran in parallel; two that share a
# lock never overlap.
set -eu
field() { printf '%s' "$AGORA_INPUT_JSON" | sed -n "s/.*\"$1\":\"\([^\"\\\\]*\)\".*/\1/p"; }
file=$(field file)
task=$(field task)
case $file in
  "" | /* | *..*) echo "scribe: the input needs \"file\": a relative path in the workspace, got \"$file\"" >&2; exit 2 ;;
esac
now() { date -u +%H:%M:%S.%N | cut -c1-12; }
start=$(now)
sleep 1
mkdir -p "$(dirname "$file")"
printf '%s (%s ran %s to %s UTC)\n' "${GREETING:-hello}" "${task:-a task}" "$start" "$(now)" >> "$file"
echo "scribe: wrote $file for ${task:-a task}"
