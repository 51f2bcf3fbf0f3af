# Records, offsets, configs and segment layout survive umount/remount; appending ~5 MiB
# with segment.bytes=1048576 rolls into >= 5 segments of at most 1 MiB each, and cat log
# returns exactly the bytes appended, before and after a remount.
source "$(dirname "$0")/lib.sh"

mount_kpfs
new_data_dir scratch # a temp dir that cleanup removes

# Small topic: records, offsets and configs.
mkdir "$MNT/small"
printf 'retention.ms=86400000\nparse.key=true\nkey.separator=:\n' > "$scratch/cmd"
cat "$scratch/cmd" > "$MNT/small/config"
printf 'k1:v1\nk2:v2\n' >> "$MNT/small/log"
echo "k3:v3" >> "$MNT/small/log"
expect_eq "log_end_offset: 3" "$(grep '^log_end_offset:' "$MNT/small/status")" "status before remount"

# Big topic: ~5 MiB of 100-character lines, appended with cat (128 KiB writes that cut
# lines in the middle).
mkdir "$MNT/big"
echo "segment.bytes=1048576" > "$MNT/big/config"
head -c 3932160 /dev/urandom | base64 -w 100 > "$scratch/in"
lines=$(wc -l < "$scratch/in")
cat "$scratch/in" >> "$MNT/big/log"
expect_eq "log_end_offset: $lines" "$(grep '^log_end_offset:' "$MNT/big/status")" "big status"
cmp "$scratch/in" <(cat "$MNT/big/log") || fail "cat big/log differs from the input"
seg_sizes() { for f in "$MNT/big/segments/"*.log; do echo "$(basename "$f") $(stat -c %s "$f")"; done; }
n=$(ls "$MNT/big/segments" | grep -c '\.log$')
[ "$n" -ge 5 ] || fail "only $n .log files after ~5 MiB: $(seg_sizes | tr '\n' ' ')"
while read -r name size; do
    [ "$size" -le 1048576 ] || fail "$name is $size bytes, over segment.bytes"
    [ "$size" -gt 0 ] || fail "$name is empty"
done < <(seg_sizes)
expect_eq "segment_count: $n" "$(grep '^segment_count:' "$MNT/big/status")" "big segment_count"

small_config=$(cat "$MNT/small/config")
big_config=$(cat "$MNT/big/config")
big_status=$(grep -E '^(log_start_offset|log_end_offset|size_bytes|segment_count|active_segment_base_offset):' "$MNT/big/status")
sizes_before=$(seg_sizes)
log_size=$(stat -c %s "$MNT/big/log")

umount_kpfs
remount_kpfs

expect_eq $'k1:v1\nk2:v2\nk3:v3' "$(cat "$MNT/small/log")" "small/log after remount"
expect_eq "log_end_offset: 3" "$(grep '^log_end_offset:' "$MNT/small/status")" "small status after remount"
expect_eq "$small_config" "$(cat "$MNT/small/config")" "small/config after remount"
expect_eq "$big_config" "$(cat "$MNT/big/config")" "big/config after remount"
expect_eq "$big_status" "$(grep -E '^(log_start_offset|log_end_offset|size_bytes|segment_count|active_segment_base_offset):' "$MNT/big/status")" "big status after remount"
expect_eq "$sizes_before" "$(seg_sizes)" "big segments after remount"
expect_eq "$log_size" "$(stat -c %s "$MNT/big/log")" "st_size of big/log after remount"
cmp "$scratch/in" <(cat "$MNT/big/log") || fail "cat big/log differs from the input after remount"

# Appends continue at the right offset after the remount.
echo "k4:v4" >> "$MNT/small/log"
expect_eq "log_end_offset: 4" "$(grep '^log_end_offset:' "$MNT/small/status")" "small status after a new append"
expect_eq "k4:v4" "$(tail -n 1 "$MNT/small/log")" "last record after a new append"
umount_kpfs
