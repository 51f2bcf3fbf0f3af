# A data directory written by the kpfs before RecordBatch v2 (the legacy-v1 fixture): mount,
# check and dump-log refuse it naming `kpfs upgrade`; the upgrade converts it, and the
# mount then shows every topic as the old kpfs did (cat log, the log's size, config), and
# appends continue the stream. An upgrade killed with SIGKILL while it runs, then run
# again, gives the same. The compacted topic's tombstone keeps the delete horizon it had,
# and the cleaner drops it once that time has come.
#
# The fixture's times are those of the day it was made, so what the cleaner does with it
# depends on the clock: the comparisons run with the cleaner off (what they prove is that
# the upgrade keeps every record, horizon and position), and the horizon's end is tested
# on a clock set on either side of it. The test means the same on any day, and
# scripts/test also runs it on a clock a year ahead.
source "$(dirname "$0")/lib.sh"

FIXTURE=$KPFS_ROOT/tests/fixtures/legacy-v1
# The broker the fixture was mounted with (its config files name this override), and no
# cleaner.
BROKER=(--override log.segment.delete.delay.ms=86400000 --override log.cleaner.enable=false)

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

# --- The tombstone at offset 9 of compacted keeps its old delete horizon; the first cleaner
# pass before that time keeps it, the first one at or after it drops it (Kafka's
# Cleaner.shouldRetainRecord: a tombstone stays while now < deleteHorizonMs).
new_data_dir DATA
new_mountpoint MNT
cp -a "$FIXTURE/clean/." "$DATA/"
# legacy_horizons DIR: the delete horizons in DIR's old segments, read from the bytes as
# the old format laid them out (FORMAT.md at 2a602bc: the length after its field at 8,
# attributes at 17 with bit 0 for a horizon, the horizon at 39), not by kpfs.
legacy_horizons() {
    python3 - "$1" <<'PY'
import pathlib, struct, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.log")):
    data, at = path.read_bytes(), 0
    while at + 47 <= len(data):
        length, = struct.unpack_from(">I", data, at + 8)
        attributes, = struct.unpack_from(">H", data, at + 17)
        if attributes & 1:
            print(struct.unpack_from(">q", data, at + 39)[0])
        at += 12 + length
PY
}
horizon=$(legacy_horizons "$DATA/compacted-0")
[[ $horizon =~ ^[0-9]+$ ]] || fail "the fixture's compacted topic has not one horizon: $horizon"
"$KPFS" upgrade "$DATA" > /dev/null
converted=$(for f in "$DATA"/compacted-0/*.log; do "$KPFS" dump-log "$f"; done \
    | sed -n 's/^baseOffset: \([0-9]*\) .* deleteHorizonMs: OptionalLong\[\([0-9]*\)\].*/\1 \2/p')
expect_eq "9 $horizon" "$converted" "the converted tombstone's batch and horizon"

# mount_at MS: mounts $DATA on a clock that starts at MS (epoch milliseconds), the cleaner
# on and quick.
mount_at() {
    local at
    at=$(date -u -d "@$(($1 / 1000))" '+%Y-%m-%d %H:%M:%S')
    on_clock "@$at" "$KPFS" mount "$MNT" --data-dir "$DATA" --override log.segment.delete.delay.ms=86400000 \
        --override log.cleaner.backoff.ms=200 || fail "kpfs mount on a clock at $at failed"
    wait_until 10 mountpoint -q "$MNT" || fail "$MNT is not a mount point after 10 s"
}
# pass_after KEYS...: appends KEYS (internal.segment.bytes=250 rolls every few records, so
# the cleaner has a dirty sealed segment) and waits for the pass that cleans them.
pass_after() {
    local k before
    before=$(grep -c ' clean offsets ' "$MNT/compacted/events" || true)
    for k in "$@"; do echo "$k:v" >> "$MNT/compacted/log"; done
    more_passes() { [ "$(grep -c ' clean offsets ' "$MNT/compacted/events")" -gt "$before" ]; }
    wait_until 20 more_passes || fail "no cleaner pass after appending $*: $(tail -3 "$MNT/compacted/events")"
}
expected=$(cat "$FIXTURE/expected/clean/compacted.log")
mount_at $((horizon - 60000))
pass_after e0 e1 e2 e3 e4
expected+=$'\ne0:v\ne1:v\ne2:v\ne3:v\ne4:v'
expect_eq "$expected" "$(cat "$MNT/compacted/log")" "compacted/log after a pass a minute before the horizon"
umount_kpfs
mount_at "$horizon"
pass_after e5 e6 e7 e8 e9
expected+=$'\ne5:v\ne6:v\ne7:v\ne8:v\ne9:v'
expect_eq "${expected#a:NULL$'\n'}" "$(cat "$MNT/compacted/log")" "compacted/log after a pass at the horizon"
expect_contains "$(grep ' clean offsets ' "$MNT/compacted/events" | tail -1)" "tombstones kept 0 removed 1" \
    "the pass at the horizon"
umount_kpfs
