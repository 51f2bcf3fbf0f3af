# Mounts that cannot work are refused up front with a one-line reason and a non-zero
# exit: a data directory already in use, a non-empty or non-directory mount point, and a
# broker config override Kafka would reject (in Kafka's wording).
source "$(dirname "$0")/lib.sh"

mount_kpfs

new_mountpoint other
status=0
err=$("$KPFS" mount "$other" --data-dir "$DATA" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a second mount of $DATA"
expect_contains "$err" "in use by another kpfs process" "second mount"
! mountpoint -q "$other" || fail "$other got mounted anyway"

new_data_dir data2
new_mountpoint full
touch "$full/something"
status=0
err=$("$KPFS" mount "$full" --data-dir "$data2" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a mount on a non-empty directory"
expect_contains "$err" "is not empty" "non-empty mount point"

status=0
err=$("$KPFS" mount "$full/something" --data-dir "$data2" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a mount on a regular file"
expect_contains "$err" "is not a directory" "file as mount point"
rm "$full/something"

status=0
err=$("$KPFS" mount "$MNT" --data-dir "$data2" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a mount on a mount point"
expect_contains "$err" "already a mount point" "mount on a mount point"

new_mountpoint fresh
status=0
err=$("$KPFS" mount "$fresh" --data-dir "$data2" --override log.retention.ms=abc 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a bad --override"
expect_contains "$err" "Invalid value abc for configuration log.retention.ms" "bad --override"
! mountpoint -q "$fresh" || fail "$fresh got mounted with a bad config"

status=0
err=$("$KPFS" mount "$fresh" --data-dir "$data2" --override log.retention.ms 2>&1) || status=$?
expect_eq 1 "$status" "exit status of a malformed --override (usage error)"
expect_contains "$err" "KEY=VALUE" "malformed --override"

umount_kpfs
