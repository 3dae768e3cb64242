#!/bin/sh
# agent.sh: adds an entry to CHANGELOG.md in the workspace. It follows the exec contract
# (docs/exec.md): the input in $AGORA_INPUT_JSON, the workspace as the working directory,
# results under $AGORA_OUT, a question in $AGORA_OUT/needs_input.json.
set -eu

# The input is canonical JSON (RFC 8785: no white space, keys sorted), so a plain string field
# can be read with sed. A real agent would use jq or its language's JSON parser.
field() {
	printf '%s' "$AGORA_INPUT_JSON" | sed -n "s/.*\"$1\":\"\([^\"\\\\]*\)\".*/\1/p"
}

entry=$(field entry)
if [ -z "$entry" ]; then
	echo "agent.sh: the input needs an \"entry\" (a string without quotes or backslashes)" >&2
	exit 2 # failed, worker-failed, exit code 2
fi

# A section from the input, or from the answer to our question when this run is a resume:
# the input then holds {"agora_resume": {"question", "answer", "partial_state"}}.
section=$(field section)
[ -n "$section" ] || section=$(field answer)

case "$section" in
Added | Changed | Fixed | Removed | Security) ;;
"")
	# Ask, and stop: the dispatch ends needs_input. Whatever was changed so far is kept.
	cat >"$AGORA_OUT/needs_input.json" <<'JSON'
{"question": "Which section of CHANGELOG.md should the entry go under?",
 "options": ["Added", "Changed", "Fixed", "Removed", "Security"],
 "partial_state": {"asked": "section"}}
JSON
	echo "agent.sh: asked which section"
	exit 0
	;;
*)
	echo "agent.sh: unknown section \"$section\"; want Added, Changed, Fixed, Removed or Security" >&2
	exit 3
	;;
esac

[ -f CHANGELOG.md ] || printf '# Changelog\n' >CHANGELOG.md
printf '\n## %s\n\n- %s\n' "$section" "$entry" >>CHANGELOG.md

mkdir -p "$AGORA_OUT/outputs"
printf 'added "%s" under %s in CHANGELOG.md\n' "$entry" "$section" >"$AGORA_OUT/outputs/summary.txt"
echo "agent.sh: added the entry under $section"
