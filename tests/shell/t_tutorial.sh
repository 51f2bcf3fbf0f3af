# docs/TUTORIAL.md is the real output of scripts/tutorial: re-run the demos on a fresh
# mount and fail with a diff if kpfs's behaviour (or the script) drifted from the text.
source "$(dirname "$0")/lib.sh"

KPFS=$KPFS "$KPFS_ROOT/scripts/tutorial" --check
