# A topic's config file takes key=value / -key lines: an invalid value refuses the whole
# change with EINVAL and Kafka's text in .kpfs/errors; valid changes, removals and a saved
# copy written back take effect, persist across remount, and defaults follow the broker.
source "$(dirname "$0")/lib.sh"

mount_kpfs --override log.cleaner.backoff.ms=500
new_data_dir scratch # a temp dir that cleanup removes
mkdir "$MNT/t"
CONFIG=$MNT/t/config

# refused LINES TEXT: writing LINES (printf %b escapes) fails with EINVAL, .kpfs/errors
# gains "t/config: TEXT", and the config did not change.
refused() {
    local before after n
    before=$(cat "$CONFIG")
    n=$(wc -l < "$MNT/.kpfs/errors")
    printf '%b' "$1" > "$scratch/cmd"
    expect_errno "Invalid argument" "cat '$scratch/cmd' >> '$CONFIG'"
    expect_contains "$(tail -n +$((n + 1)) "$MNT/.kpfs/errors" | cut -d' ' -f2-)" "t/config: $2" ".kpfs/errors after '$1'"
    after=$(cat "$CONFIG")
    expect_eq "$before" "$after" "config after refused '$1'"
}

refused 'segment.bytes=400\n' "Invalid value 400 for configuration segment.bytes: Value must be at least 1048576"
refused 'retention.ms=abc\n' "Invalid value abc for configuration retention.ms: Not a number of type LONG"
refused 'cleanup.policy=foobar\n' "Invalid value foobar for configuration cleanup.policy: String must be one of: compact, delete"
refused 'foo=1\n' "Unknown topic config name: foo"
refused 'min.cleanable.dirty.ratio=1.2\n' "Invalid value 1.2 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
# One bad line among good ones: nothing of the write is applied.
refused 'retention.ms=1000\nsegment.ms=2000\nsegment.bytes=400\n' "Invalid value 400 for configuration segment.bytes: Value must be at least 1048576"
grep -q "^# retention.ms=604800000 " "$CONFIG" || fail "retention.ms changed by a refused write"

# A good multi-line write applies every line; the values show under # overrides.
printf 'retention.ms=1000\nsegment.ms=2000\n' > "$scratch/cmd"
cat "$scratch/cmd" > "$CONFIG"
overrides() { sed -n '/^# overrides$/,/^# defaults$/p' "$CONFIG" | grep -v '^#'; }
expect_eq $'retention.ms=1000\nsegment.ms=2000' "$(overrides)" "overrides after a good write"
expect_eq "segment.ms=2000" "$(grep '^segment.ms=' "$CONFIG")" "segment.ms"

# -key removes an override: the value goes back to the default, shown as a comment.
echo "-segment.ms" >> "$CONFIG"
expect_eq "retention.ms=1000" "$(overrides)" "overrides after -segment.ms"
expect_eq "# segment.ms=604800000 (DEFAULT_CONFIG:log.roll.hours=168)" "$(grep '^# segment.ms=' "$CONFIG")" "segment.ms after removal"

# A saved copy written back restores exactly the saved overrides.
cat "$CONFIG" > "$scratch/saved"
printf 'retention.ms=5\nsegment.ms=7\ncleanup.policy=compact\n' > "$CONFIG"
expect_eq "retention.ms=5" "$(grep '^retention.ms=' "$CONFIG")" "retention.ms before restore"
cat "$scratch/saved" > "$CONFIG"
expect_eq "$(cat "$scratch/saved")" "$(cat "$CONFIG")" "config after cat saved > config"

# A rewrite with a refused line changes nothing: `>`'s truncation is part of the change
# (the O_TRUNC open), not applied before its lines are checked.
expect_errno "Invalid argument" "printf 'segment.ms=7\\nretention.ms=soon\\n' > '$CONFIG'"
expect_eq "$(cat "$scratch/saved")" "$(cat "$CONFIG")" "config after a refused rewrite"
echo "log.cleaner.threads=2" >> "$MNT/.kpfs/config"
expect_errno "Invalid argument" "printf 'log.cleaner.threads=abc\\n' > '$MNT/.kpfs/config'"
expect_contains "$(cat "$MNT/.kpfs/config")" $'\nlog.cleaner.threads=2\n' ".kpfs/config after a refused rewrite"

# Overrides persist across umount/remount.
mkdir "$MNT/p"
printf 'retention.ms=4321\nmax.message.bytes=2000\n' > "$MNT/p/config"
before=$(cat "$MNT/p/config")
umount_kpfs
remount_kpfs --override log.cleaner.backoff.ms=500
expect_eq "$before" "$(cat "$MNT/p/config")" "p/config after remount"
expect_eq $'max.message.bytes=2000\nretention.ms=4321' \
    "$(sed -n '/^# overrides$/,/^# defaults$/p' "$MNT/p/config" | grep -v '^#')" "p overrides after remount"

# A topic without an override follows a dynamic broker change; one with an override
# keeps it.
mkdir "$MNT/d"
echo "log.retention.ms=1234" > "$MNT/.kpfs/config"
expect_eq "# retention.ms=1234 (DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1234)" "$(grep '^# retention.ms=' "$MNT/d/config")" "d retention.ms after log.retention.ms=1234"
expect_eq "retention.ms=4321" "$(grep '^retention.ms=' "$MNT/p/config")" "p retention.ms (overridden) after the broker change"

umount_kpfs
