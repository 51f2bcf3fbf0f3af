# A data directory written by the kpfs before RecordBatch v2 (the legacy-v1 fixture): mount,
# check and dump-log refuse it naming `kpfs upgrade`; the upgrade converts it, and the
# mount then shows every topic as the old kpfs did (cat log, the log's size, config), and
# appends continue the stream. An upgrade killed with SIGKILL while it runs, then run
# again, gives the same.
source "$(dirname "$0")/lib.sh"

FIXTURE=$KPFS_ROOT/tests/fixtures/legacy-v1
# The broker the fixture was mounted with: its config files name this override.
BROKER=(--override log.segment.delete.delay.ms=86400000)

# expect_as_before DIR TOPIC...: what the mounted topics show is what the old kpfs showed.
expect_as_before() {
    local dir=$1 t
    shift
    for t in "$@"; do
        cmp "$FIXTURE/expected/$dir/$t.log" "$MNT/$t/log" || fail "cat $t/log differs"
        expect_eq "$(cat "$FIXTURE/expected/$dir/$t.size")" "$(stat -c %s "$MNT/$t/log")" "size of $t/log"
        # The same overrides, and every default the old kpfs listed (this one may list
        # configs it did not have).
        cmp <(sed '/^# defaults$/q' "$FIXTURE/expected/$dir/$t.config") <(sed '/^# defaults$/q' "$MNT/$t/config") \
            || fail "the overrides in $t/config differ"
        lost=$(grep -Fxv -f "$MNT/$t/config" "$FIXTURE/expected/$dir/$t.config" || true)
        [ -z "$lost" ] || fail "$t/config lost: $lost"
        if ls "$MNT/$t/segments" | grep -q -E '^kpfs-|\.(deleted|cleaned|upgrading)$'; then
            fail "$t/segments holds old leftovers: $(ls "$MNT/$t/segments" | tr '\n' ' ')"
        fi
    done
}

new_data_dir DATA
new_mountpoint MNT
cp -a "$FIXTURE/clean/." "$DATA/"

status=0
err=$("$KPFS" mount "$MNT" --data-dir "$DATA" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of a mount of an old data dir"
expect_contains "$err" "kpfs upgrade $DATA" "mount of an old data dir"
! mountpoint -q "$MNT" || fail "$MNT got mounted anyway"
status=0
err=$("$KPFS" check "$DATA" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of kpfs check of an old data dir"
expect_contains "$err" "kpfs upgrade $DATA" "kpfs check of an old data dir"
status=0
err=$("$KPFS" dump-log "$DATA/plain-0/00000000000000000000.log" 2>&1) || status=$?
expect_eq 2 "$status" "exit status of kpfs dump-log of an old segment"
expect_contains "$err" "kpfs upgrade $DATA" "kpfs dump-log of an old segment"

out=$("$KPFS" upgrade "$DATA")
expect_contains "$out" "5 topics, 16 segments" "kpfs upgrade"
expect_contains "$("$KPFS" upgrade "$DATA")" "nothing to do" "a second kpfs upgrade"
"$KPFS" check "$DATA" > /dev/null || fail "kpfs check after the upgrade: $("$KPFS" check "$DATA")"
"$KPFS" dump-log "$DATA/plain-0/00000000000000000000.log" | grep -q 'magic: 2' \
    || fail "dump-log after the upgrade shows no v2 batch"

remount_kpfs "${BROKER[@]}"
expect_as_before clean plain retained keyed compacted configured
size=$(stat -c %s "$MNT/retained/log")
echo retained-12 >> "$MNT/retained/log"
expect_eq "$((size + 12))" "$(stat -c %s "$MNT/retained/log")" "size after an append"
expect_eq retained-12 "$(tail -n 1 "$MNT/retained/log")" "the appended line"
umount_kpfs

# kill -9 during the upgrade of a bigger old data dir (the fixture's segments, many times
# over), then again: the copies of each topic read as the originals.
new_data_dir DATA
new_mountpoint MNT
topics=(plain retained keyed compacted configured)
copies=40
# With their recovery points: above it, an open takes a segment shorter than the next
# one's base for a lost tail (the compacted topic's emptied segments are not).
points=()
for ((i = 0; i < copies; i++)); do
    for t in "${topics[@]}"; do
        cp -a "$FIXTURE/clean/$t-0" "$DATA/$t$i-0"
        points+=("$t$i 0 $(awk -v t="$t" '$1 == t { print $3 }' "$FIXTURE/clean/recovery-point-offset-checkpoint")")
    done
done
printf '0\n%s\n' "${#points[@]}" > "$DATA/recovery-point-offset-checkpoint"
printf '%s\n' "${points[@]}" >> "$DATA/recovery-point-offset-checkpoint"
"$KPFS" upgrade "$DATA" > /dev/null &
pid=$!
# Killed once some segment is converted (a .stream exists), whatever it does then.
converted() { compgen -G "$DATA/kpfs-topics/*/*.stream" > /dev/null; }
wait_until 20 converted || fail "kpfs upgrade converted nothing in 20 s"
kill -9 "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
if [ ! -e "$DATA/kpfs-format-version" ]; then
    status=0
    err=$("$KPFS" mount "$MNT" --data-dir "$DATA" 2>&1) || status=$?
    expect_eq 2 "$status" "exit status of a mount of a half-upgraded data dir"
    expect_contains "$err" "kpfs upgrade $DATA" "mount of a half-upgraded data dir"
fi
"$KPFS" upgrade "$DATA" > /dev/null
remount_kpfs "${BROKER[@]}"
for ((i = 0; i < copies; i++)); do
    for t in "${topics[@]}"; do
        cmp "$FIXTURE/expected/clean/$t.log" "$MNT/$t$i/log" || fail "cat $t$i/log differs"
        expect_eq "$(cat "$FIXTURE/expected/clean/$t.size")" "$(stat -c %s "$MNT/$t$i/log")" "size of $t$i/log"
    done
done
umount_kpfs
