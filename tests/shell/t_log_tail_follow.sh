# tail -f on log follows appends across many segment rolls and across retention deleting
# segments underneath it: every line arrives once, in order, never "file truncated"; an
# open descriptor keeps reading across a deletion (it may skip what was deleted).
source "$(dirname "$0")/lib.sh"

BG=()
trap 'for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done; _kpfs_cleanup' EXIT

mount_kpfs --override log.retention.check.interval.ms=500 \
    --override log.segment.delete.delay.ms=2000 --override log.cleaner.backoff.ms=500
new_data_dir scratch # a temp dir that cleanup removes

stat_of() { grep "^$2:" "$MNT/$1/status" | cut -d' ' -f2; }
lines_in() { [ "$(wc -l < "$1")" -ge "$2" ]; }
status_at_least() { [ "$(stat_of "$1" "$2")" -ge "$3" ]; }

# append TOPIC FIRST LAST: lines TOPIC-FIRST..TOPIC-LAST (zero-padded), one write(2) each.
append() {
    local n
    exec 3>>"$MNT/$1/log"
    for ((n = $2; n <= $3; n++)); do printf '%s-%03d\n' "$1" "$n" >&3; done
    exec 3>&-
}

# check_sequence FILE TOPIC: every line is TOPIC-NNN, strictly increasing (so no repeats).
check_sequence() {
    local bad
    bad=$(awk -v t="$2" -F- '$1 != t || $2 !~ /^[0-9][0-9][0-9]$/ || (NR > 1 && $2 + 0 <= prev) { print NR": "$0; exit } { prev = $2 + 0 }' "$1")
    expect_eq "" "$bad" "first bad line of $1 (garbage, repeat or out of order)"
}

# 1. Many rolls: 300 lines in 6 rounds on ~300-byte segments.
mkdir "$MNT/f1"
echo "internal.segment.bytes=300" > "$MNT/f1/config"
tail -n +1 -f -s 0.1 "$MNT/f1/log" > "$scratch/f1.out" 2> "$scratch/f1.err" &
BG+=($!)
for round in 0 1 2 3 4 5; do
    append f1 $((round * 50)) $((round * 50 + 49))
    wait_until 20 lines_in "$scratch/f1.out" $((round * 50 + 50)) || fail "tail has $(wc -l < "$scratch/f1.out") of $((round * 50 + 50)) lines"
done
[ "$(stat_of f1 segment_count)" -ge 20 ] || fail "expected many rolls, got segment_count $(stat_of f1 segment_count)"
expect_eq 300 "$(wc -l < "$scratch/f1.out")" "lines seen by tail -f"
check_sequence "$scratch/f1.out" f1
seq -f 'f1-%03g' 0 299 | cmp -s - "$scratch/f1.out" || fail "tail -f output is not f1-000..f1-299"
if grep -q "truncated" "$scratch/f1.err"; then fail "tail said: $(cat "$scratch/f1.err")"; fi

# 2. Retention deletes segments under a following tail; lines appended after the
# deletion still arrive, without repeats and without "file truncated".
mkdir "$MNT/f2"
printf 'internal.segment.bytes=300\nretention.bytes=600\n' > "$MNT/f2/config"
tail -n +1 -f -s 0.1 "$MNT/f2/log" > "$scratch/f2.out" 2> "$scratch/f2.err" &
BG+=($!)
append f2 0 59
wait_until 15 status_at_least f2 segments_deleted_size 1 || fail "retention deleted nothing: $(cat "$MNT/f2/status")"
size_before=$(stat -c %s "$MNT/f2/log")
append f2 60 119
wait_until 15 grep -qx f2-119 "$scratch/f2.out" || fail "tail never showed f2-119; it has $(tail -n 3 "$scratch/f2.out")"
wait_until 15 status_at_least f2 log_start_offset 60 || fail "retention did not catch up: $(cat "$MNT/f2/status")"
append f2 120 129
wait_until 15 grep -qx f2-129 "$scratch/f2.out" || fail "tail never showed f2-129"
check_sequence "$scratch/f2.out" f2
if grep -q "truncated" "$scratch/f2.err"; then fail "tail said: $(cat "$scratch/f2.err")"; fi
[ "$(stat -c %s "$MNT/f2/log")" -ge "$size_before" ] || fail "st_size of log shrank"

# 3. An open descriptor keeps reading across a deletion, without an error: cat
# continues where dd stopped (sequential reads; records deleted meanwhile are skipped).
mkdir "$MNT/f3"
echo internal.segment.bytes=300 > "$MNT/f3/config"
append f3 0 29
exec 4<"$MNT/f3/log"
first=$(dd bs=7 count=1 status=none <&4)
expect_eq f3-000 "$first" "first line read on fd 4"
# Retention only from now on: a check before the first read would take what it reads.
echo retention.bytes=600 >> "$MNT/f3/config"
append f3 30 59
wait_until 15 status_at_least f3 log_start_offset 30 || fail "retention deleted nothing under fd 4: $(cat "$MNT/f3/status")"
cat <&4 > "$scratch/f3.out" 2> "$scratch/f3.err" || fail "cat on fd 4 failed: $(cat "$scratch/f3.err")"
exec 4<&-
expect_eq "" "$(cat "$scratch/f3.err")" "stderr of cat on fd 4"
expect_eq f3-059 "$(tail -n 1 "$scratch/f3.out")" "last line cat read on fd 4"
{ echo f3-000; cat "$scratch/f3.out"; } > "$scratch/f3.all"
check_sequence "$scratch/f3.all" f3
echo "reader_skips after cat: $(stat_of f3 reader_skips)" # >0 is allowed

# 4. The same with bash's read builtin, which reads a block and seeks back to just
# after the line it consumed: each line must still come once.
mkdir "$MNT/f4"
echo internal.segment.bytes=300 > "$MNT/f4/config"
append f4 0 29
exec 4<"$MNT/f4/log"
read -r -u 4 first || fail "read of the first line failed"
expect_eq f4-000 "$first" "first line read on fd 4"
# Retention only from now on: a check before the first read would take what it reads.
echo retention.bytes=600 >> "$MNT/f4/config"
append f4 30 59
wait_until 15 status_at_least f4 log_start_offset 30 || fail "retention deleted nothing under fd 4: $(cat "$MNT/f4/status")"
: > "$scratch/f4.out"
while read -r -u 4 line 2>> "$scratch/f4.err"; do echo "$line" >> "$scratch/f4.out"; done
exec 4<&-
expect_eq "" "$(cat "$scratch/f4.err")" "stderr of read on fd 4"
expect_eq f4-059 "$(tail -n 1 "$scratch/f4.out")" "last line read on fd 4"
{ echo f4-000; cat "$scratch/f4.out"; } > "$scratch/f4.all"
check_sequence "$scratch/f4.all" f4
echo "reader_skips after read: $(stat_of f4 reader_skips)" # >0 is allowed

for p in "${BG[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
BG=()
umount_kpfs
