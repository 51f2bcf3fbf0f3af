# du through the mount counts what the data directory holds: files under segments/ report
# their backing file's real st_blocks (active indexes are sparse files preallocated to
# segment.index.bytes, 10 MiB each), generated files the blocks their bytes fill.
source "$(dirname "$0")/lib.sh"

mount_kpfs

for i in $(seq 1 30); do mkdir "$MNT/t$i"; done
seq 1 20000 >> "$MNT/t1/log"

for f in "$MNT"/t1/segments/* "$MNT"/t2/segments/*; do
    topic=${f#"$MNT"/}
    topic=${topic%%/*}
    backing="$DATA/$topic-0/${f##*/}"
    expect_eq "$(stat -c '%s %b' "$backing")" "$(stat -c '%s %b' "$f")" "size and blocks of $topic/segments/${f##*/}"
done
index="$MNT/t2/segments/00000000000000000000.index"
[ "$(stat -c %b "$index")" -lt $(($(stat -c %s "$index") / 512)) ] || fail "the empty index is not reported sparse"

log_size=$(stat -c %s "$MNT/t1/log")
expect_eq $(((log_size + 511) / 512)) "$(stat -c %b "$MNT/t1/log")" "blocks of t1/log"

# The whole mount: the data directory plus the generated files (t1/log and
# t1/partitions/0/log each repeat t1's data; config and status take a block or two per
# topic and per partition), nowhere near 30 x 20 MiB. Partition 0's segment files are
# counted once, though two folders list them.
mount_kb=$(du -sk "$MNT" | cut -f1)
data_kb=$(du -sk "$DATA" | cut -f1)
expect_eq 2 "$(stat -c %h "$MNT/t1/partitions/0/segments/00000000000000000000.log")" "links of a segment file"
[ "$mount_kb" -le $((data_kb + 2 * log_size / 1024 + 30 * 8 + 8)) ] ||
    fail "du -sk of the mount is $mount_kb KiB for a data directory of $data_kb KiB"

umount_kpfs
