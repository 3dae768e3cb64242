#!/usr/bin/env bash
# Refuses agora programs built with -tags agora_weaken (internal/version.WeakenTag): that tag
# turns off a verify gate's protected paths, agora verify's inclusion check, the model pin and
# the worker's own answer, for selftest's control test alone, which builds them itself. Go takes
# build tags from GOFLAGS in the environment or in `go env -w` as well as from the command line,
# so a build that ships (make build, scripts/images.sh) could carry the tag unasked; such a
# binary has the version and commit of a real one. Each program named is checked with
# `go version -m`; a weakened one is removed, with all the others named, and the script fails.
set -euo pipefail
bad=()
for p in "$@"; do
  if go version -m "$p" | grep -Eq $'^\tbuild\t-tags=(.*,)?agora_weaken(,.*)?$'; then
    bad+=("$p")
  fi
done
if [ ${#bad[@]} -gt 0 ]; then
  rm -f -- "$@"
  echo "refuse-weakened: ${bad[*]} built with -tags agora_weaken (GOFLAGS here: "$(go env GOFLAGS)"), whose controls are off on purpose for selftest's control test; removed $*: build again without the tag" >&2
  exit 1
fi
