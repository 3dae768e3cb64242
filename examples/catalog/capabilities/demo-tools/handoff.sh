#!/bin/sh
# handoff: the make demo plan's review step. It reads the patch an earlier task handed off
# (the plan's needs: mounts it read-only at $AGORA_INPUTS/docs-patch/patch.diff) and writes
# REVIEW.md quoting the files it touched and the lines it added, so the run's own patches
# show what was handed from one task to the next.
set -eu
in="$AGORA_INPUTS/docs-patch/patch.diff"
[ -f "$in" ] || { echo "handoff: no patch was handed off at $in" >&2; exit 2; }
{
  echo "# Review of greet-docs' patch (handed off at /agora/inputs/docs-patch/patch.diff)"
  echo
  echo "Files: $(sed -n 's|^+++ b/||p' "$in" | tr '\n' ' ')"
  echo "Added lines:"
  sed -n 's/^+\([^+]\)/    \1/p' "$in"
} > REVIEW.md
echo "handoff: reviewed $(grep -c '^+[^+]' "$in") added lines of greet-docs' patch into REVIEW.md"
