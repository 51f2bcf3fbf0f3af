# What goes into log with >> comes back out of cat byte for byte: keyed records with a
# custom separator, tombstones via null.marker, binary bytes, empty lines, the longest
# line max.message.bytes admits; bad lines (no separator, too large) are refused whole
# and append nothing; max.message.bytes limits each batch, header included.
source "$(dirname "$0")/lib.sh"

mount_kpfs

# Keys: parse.key=true with key.separator=: round-trips key:value.
mkdir "$MNT/keyed"
printf 'parse.key=true\nkey.separator=:\n' > "$MNT/keyed/config"
echo "a:1" >> "$MNT/keyed/log"
expect_eq "a:1" "$(cat "$MNT/keyed/log")" "keyed log after a:1"

# Tombstones: a value equal to null.marker is a null value and reads back as the marker.
echo "null.marker=NULL" >> "$MNT/keyed/config"
echo "a:NULL" >> "$MNT/keyed/log"
expect_eq $'a:1\na:NULL' "$(cat "$MNT/keyed/log")" "keyed log after a tombstone"

# A line without the separator is refused with Kafka's console-producer text.
expect_errno "Invalid argument" "echo nosep >> '$MNT/keyed/log'"
expect_contains "$(cat "$MNT/.kpfs/errors")" "No key separator found on line number 1" ".kpfs/errors"
expect_eq $'a:1\na:NULL' "$(cat "$MNT/keyed/log")" "keyed log after a refused line"
expect_eq 2 "$(grep '^log_end_offset:' "$MNT/keyed/status" | cut -d' ' -f2)" "log_end_offset"

# Non-UTF-8 bytes and a NUL round-trip byte-exact.
mkdir "$MNT/bin"
new_data_dir scratch # a temp dir that cleanup removes
in=$scratch/in
out=$scratch/out
printf '\xff\xfe\x00x\n' > "$in"
cat "$in" >> "$MNT/bin/log"
cat "$MNT/bin/log" > "$out"
cmp "$in" "$out" || fail "binary line did not round-trip"

# Empty lines are records too.
mkdir "$MNT/empty"
printf 'a\n\n\nb\n' >> "$MNT/empty/log"
expect_eq 4 "$(wc -l < "$MNT/empty/log")" "wc -l with empty lines"
expect_eq $'a\n\n\nb' "$(cat "$MNT/empty/log")" "log with empty lines"
expect_eq 4 "$(grep '^log_end_offset:' "$MNT/empty/status" | cut -d' ' -f2)" "log_end_offset with empty lines"

# The longest line the default max.message.bytes (1048588) admits, spanning several
# write(2)s and FUSE writes, round-trips: its batch is Kafka's 61-byte header and an
# 11-byte record header (length, attributes, deltas, key and value lengths, header
# count) before the line. One byte more is refused whole.
mkdir "$MNT/big"
{ head -c 1048516 /dev/zero | tr '\0' 'x'; echo; } > "$in"
cat "$in" >> "$MNT/big/log"
cat "$MNT/big/log" > "$out"
cmp "$in" "$out" || fail "the longest line did not round-trip"
expect_eq 1048517 "$(stat -c %s "$MNT/big/log")" "st_size of the longest line"
{ head -c 1048517 /dev/zero | tr '\0' 'x'; echo; } > "$in"
expect_errno "File too large" "cat '$in' >> '$MNT/big/log'"
expect_eq 1 "$(status_field big log_end_offset)" "log_end_offset after a line one byte too long"

# A line of max.message.bytes+1 is refused with EFBIG, and a good line in the same
# write(2) is not appended either (cat writes the small file in one write(2); bash's
# printf would flush per line).
mkdir "$MNT/small"
echo "max.message.bytes=100" > "$MNT/small/config"
echo "before" >> "$MNT/small/log"
long=$(head -c 101 /dev/zero | tr '\0' 'y')
expect_errno "File too large" "printf '%s\n' '$long' >> '$MNT/small/log'"
printf 'ok\n%s\n' "$long" > "$in"
expect_errno "File too large" "cat '$in' >> '$MNT/small/log'"
expect_eq "before" "$(cat "$MNT/small/log")" "log after refused large lines"
expect_eq 1 "$(grep '^log_end_offset:' "$MNT/small/status" | cut -d' ' -f2)" "log_end_offset after refused large lines"
expect_contains "$(cat "$MNT/.kpfs/errors")" "small/log: The record batch size in the append to small-0 is 171 bytes which exceeds the maximum configured value of 100." ".kpfs/errors after EFBIG"

# The limit is on the batch: a 32-byte line makes a 100-byte batch (61 + 7 + 32), a
# 33-byte one is refused; one write of lines that fit one by one goes into batches that
# each fit.
mkdir "$MNT/batch"
echo "max.message.bytes=100" > "$MNT/batch/config"
line32=$(head -c 32 /dev/zero | tr '\0' 'a')
expect_errno "File too large" "echo '${line32}b' >> '$MNT/batch/log'"
printf '%s\n' "$line32" b c > "$in"
cat "$in" >> "$MNT/batch/log"
expect_eq "$(cat "$in")" "$(cat "$MNT/batch/log")" "lines in batches that fit"
sizes=$("$KPFS" dump-log "$MNT/batch/segments/00000000000000000000.log" | sed -n 's/.* size: \([0-9]*\) .*/\1/p' | tr '\n' ' ')
expect_eq "100 77 " "$sizes" "batch sizes under max.message.bytes=100"

# Ordinary text tools work on log.
mkdir "$MNT/tools"
seq 1 100 | sed 's/^/line-/' >> "$MNT/tools/log"
expect_eq $'line-1\nline-2\nline-3' "$(head -n 3 "$MNT/tools/log")" "head -n 3"
expect_eq $'line-98\nline-99\nline-100' "$(tail -n 3 "$MNT/tools/log")" "tail -n 3"
expect_eq $'line-50\nline-100' "$(grep -E '^line-(50|100)$' "$MNT/tools/log")" "grep"
expect_eq 100 "$(wc -l < "$MNT/tools/log")" "wc -l"

umount_kpfs
