# The seed's time-retention demo: with retention.ms=5000 and segment.ms=3000, two
# batches 3+ s apart make segments 0 and 5; both expire, are renamed .deleted, removed
# after the delete delay, and a new empty active segment 10 remains; log never shrinks.
source "$(dirname "$0")/lib.sh"

# A delete delay of 8 s keeps both .deleted generations visible together for a while
# (segment 0 expires ~3.5 s before segment 5).
mount_kpfs --override log.retention.check.interval.ms=500 \
    --override log.segment.delete.delay.ms=8000 --override log.cleaner.backoff.ms=500

T=$MNT/retention-time-demo
mkdir "$T"
echo "retention.ms=5000" > "$T/config"
echo "segment.ms=3000" >> "$T/config"

produce() { seq "$1" "$2" | sed 's/^/record-/' >> "$T/log"; }
has() { ls "$T/segments" | grep -qx "$1"; }
lacks() { ! ls "$T/segments" | grep -qx "$1"; }

produce 0 4
expect_eq "00000000000000000000.log" "$(ls "$T/segments" | grep '\.log$')" "segments after 5 records"
sleep 3.5 # scenario time: let segment.ms (3 s) pass so the next append rolls
produce 5 9
expect_eq $'00000000000000000000.log\n00000000000000000005.log' "$(ls "$T/segments" | grep '\.log$')" "segments after the second batch"
expect_eq 10 "$(wc -l < "$T/log")" "records before retention"
size_before=$(stat -c %s "$T/log")

both_deleted() { has 00000000000000000000.log.deleted && has 00000000000000000005.log.deleted; }
wait_until 20 both_deleted || fail "never saw both .log.deleted; segments/: $(ls "$T/segments" | tr '\n' ' ')"
for f in 00000000000000000000 00000000000000000005; do
    has "$f.index.deleted" || fail "$f.index.deleted missing; segments/: $(ls "$T/segments" | tr '\n' ' ')"
    has "$f.timeindex.deleted" || fail "$f.timeindex.deleted missing"
    lacks "$f.log" || fail "$f.log still listed"
done
# Segment 5 was rolled by an append, so it had a producer snapshot, which goes with it;
# segment 0 of a new topic has none (Kafka's takeSnapshot only past the last one).
has 00000000000000000005.snapshot.deleted || fail "no 5.snapshot.deleted; segments/: $(ls "$T/segments" | tr '\n' ' ')"
lacks 00000000000000000000.snapshot.deleted || fail "segment 0 had a snapshot"
has 00000000000000000010.log || fail "no new active segment 10; segments/: $(ls "$T/segments" | tr '\n' ' ')"
expect_eq 0 "$(stat -c %s "$T/segments/00000000000000000010.log")" "size of the new active segment"
expect_eq "log_start_offset: 10" "$(grep '^log_start_offset:' "$T/status")" "status"
expect_eq "active_segment_base_offset: 10" "$(grep '^active_segment_base_offset:' "$T/status")" "status"
expect_eq "" "$(cat "$T/log")" "cat log after retention"
expect_eq "$size_before" "$(stat -c %s "$T/log")" "st_size of log after retention"

none_deleted() { ! ls "$T/segments" | grep -q '\.deleted$'; }
wait_until 20 none_deleted || fail ".deleted files not removed: $(ls "$T/segments" | tr '\n' ' ')"
# The roll retention made before deleting wrote segment 10's snapshot (Kafka's roll).
expect_eq "$(printf '%s\n' 00000000000000000010.{index,log,snapshot,timeindex} \
    leader-epoch-checkpoint partition.metadata)" "$(ls "$T/segments")" "segments/ after physical deletion"
[ ! -e "$DATA/retention-time-demo-0/00000000000000000000.log.deleted" ] || fail "data dir still has .deleted"

# The log keeps working after everything was deleted.
produce 10 10
expect_eq "record-10" "$(cat "$T/log")" "cat log after a new record"
umount_kpfs
