# Configs that are accepted but do not do what they seem get a warning: one line in
# .kpfs/errors when a write brings it in, and a config_warning line in status while
# it holds. Each of the five cases of the observability issue.
source "$(dirname "$0")/lib.sh"

mount_kpfs
mkdir "$MNT/c"
set_config() { printf '%s\n' "$1" >> "$MNT/c/config"; }
warned() {
    expect_contains "$(cat "$MNT/.kpfs/errors")" "c/config: warning: $1" ".kpfs/errors"
    expect_contains "$(cat "$MNT/c/status")" "config_warning: $1" "status"
}

set_config "parse.key=true"
set_config "cleanup.policy=compact"
set_config "retention.ms=86400000"
warned "retention.ms has no effect: cleanup.policy=compact"

set_config "delete.retention.ms=0"
warned "delete.retention.ms=0: tombstones can be removed"

set_config "parse.key=false"
warned "cleanup.policy has compact but parse.key=false"

mkdir "$MNT/d"
printf 'retention.bytes=1000\n' > "$MNT/d/config"
expect_contains "$(cat "$MNT/.kpfs/errors")" "d/config: warning: retention.bytes 1000 is below the segment size" ".kpfs/errors"
printf 'segment.ms=600000\n' >> "$MNT/d/config"
printf 'retention.ms=60000\n' >> "$MNT/d/config"
expect_contains "$(cat "$MNT/d/status")" "config_warning: segment.ms 600000 is above retention.ms 60000" "status of d"

# A warning is reported once, when it appears, not on every later write.
before=$(grep -c "d/config: warning: retention.bytes" "$MNT/.kpfs/errors")
printf 'flush.ms=1000\n' >> "$MNT/d/config"
expect_eq "$before" "$(grep -c "d/config: warning: retention.bytes" "$MNT/.kpfs/errors")" "warnings repeated"

# Removing the cause removes the warning from status.
printf -- '-retention.bytes\n' >> "$MNT/d/config"
case $(cat "$MNT/d/status") in *"retention.bytes 1000"*) fail "warning still in status after -retention.bytes" ;; esac
umount_kpfs
