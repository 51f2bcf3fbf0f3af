# A Kafka Streams 4.3.1 application with processing.guarantee=exactly_once_v2 against
# `kpfs serve` (issue 27): tests/clients/java/KpfsWordCount.java counts the words of N
# lines spread over three partitions (a repartition topic, a changelog that kpfs's cleaner
# compacts as the app runs, transactions over the nine partitions of the app's topics with
# the group's offsets, the repartition topic purged by DeleteRecords). The app is killed
# with SIGKILL mid-way and restarted (its open transaction aborted, its state restored from
# the changelog read_committed), then kpfs is killed with SIGKILL under the running app
# and restarted on the same data directory and port, and the app goes on to the end. Once
# the cleaner has compacted the changelog, the app is killed again, M more lines are
# written and the app restarted: its counts go on from the state it restores from the
# compacted changelog. A read_committed reader of the output must see every word's counts
# go 1, 2, ... its true count with none skipped or repeated: a committed transaction lost,
# an aborted one's output shown, an input counted twice or a count restored wrong breaks
# that sequence. The group's committed offsets must be the input's end, no transaction may
# be left open once the app has stopped, and the internal topics must have the configs
# Streams created them with. Last, the app with group.protocol=streams (KIP-1071) is told
# the cluster does not support it. It writes Kafka Streams' rows of the client matrix.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kafka_lib.sh"

N=1500
M=300
new_data_dir scratch
new_data_dir DATA
rows=$(matrix_file kafka-streams-4.3.1)
javac -Xlint:all -Werror -d "$scratch/classes" -cp "$KAFKA_HOME/libs/*" \
    "$KPFS_ROOT/tests/clients/java/KpfsWordCount.java" || fail "javac KpfsWordCount.java failed"
# Kafka's tools' log4j2 config: the clients' warnings to stderr, in the app's output file.
# shellcheck disable=SC2206 # the JVM options are words
WC=(java $KAFKA_JVM_PERFORMANCE_OPTS "-Dlog4j2.configurationFile=$KAFKA_HOME/config/tools-log4j2.yaml"
    -cp "$KAFKA_HOME/libs/*:$scratch/classes" KpfsWordCount)
# No initial rebalance delay: each start of the app (the group's only member) is assigned
# at once. The cleaner looks for work every 200 ms, so that it compacts the changelog
# while the app runs.
SERVE_ARGS=(--override group.initial.rebalance.delay.ms=0 --override log.cleaner.backoff.ms=200)

serve_kpfs_listening "$scratch/serve1.log" "$DATA" "${SERVE_ARGS[@]}"
timeout 60 "${WC[@]}" seed "$BOOTSTRAP" 0 "$N" >"$scratch/seed1.out" 2>&1 ||
    fail "seeding failed: $(tail -n 20 "$scratch/seed1.out")"

app=
# start_app N [COMMIT_INTERVAL_MS]: run N of the app, its output in app N.out.
start_app() {
    "${WC[@]}" run "$BOOTSTRAP" "$scratch/state" ${2:+"$2"} >"$scratch/app$1.out" 2>&1 &
    app=$!
}
stop_app() { if [ -n "$app" ]; then kill -9 "$app" 2>/dev/null || true; fi; }
trap 'stop_app; _kafka_cleanup; _kpfs_cleanup' EXIT
# lines_read FILE: how many input lines the app printed it read (read again after an
# aborted transaction counts again).
lines_read() { grep -c '^line ' "$1" || true; }
read_at_least() { [ "$(lines_read "$1")" -ge "$2" ]; }
# app_tail FILE: the end of the app's output without its "line" lines.
app_tail() { grep -v '^line ' "$1" | tail -n 30; }
# verify LINES SECONDS [final] OUT: KpfsWordCount's verify of lines 0..LINES-1.
verify() {
    timeout $(($2 + 60)) "${WC[@]}" verify "$BOOTSTRAP" "$1" "$2" ${3:+"$3"} >"$4" 2>&1
}

# 1. The app, killed once it has read a third of the input. Its first transaction is
# held open past the kill: a commit every 9 s (under Streams' 10 s transaction timeout)
# instead of every 100 ms, while the 500 lines take 1.5 s. With 100 ms, a kill in the few
# milliseconds after a commit, before the next record went out, left nothing to abort.
start_app 1 9000
wait_until 60 read_at_least "$scratch/app1.out" $((N / 3)) ||
    fail "the app read no $((N / 3)) lines in 60 s: $(app_tail "$scratch/app1.out")"
kill -9 "$app"
wait "$app" 2>/dev/null || true
read1=$(lines_read "$scratch/app1.out")
[ "$(grep '^line ' "$scratch/app1.out" | sort -u | wc -l)" -lt "$N" ] ||
    fail "the app had read every line before its kill: not mid-way"

# 2. Restarted on the same state directory; kpfs killed under it once it has read another
# third, and restarted on the same data directory and port.
start_app 2
wait_until 60 read_at_least "$scratch/app2.out" $((N / 3)) ||
    fail "the restarted app read no $((N / 3)) lines in 60 s: $(app_tail "$scratch/app2.out")"
kill -9 "$SERVE_PID"
wait "$SERVE_PID" 2>/dev/null || true
read2=$(lines_read "$scratch/app2.out")
[ "$((read1 + read2))" -lt "$N" ] || fail "the app had read $read1 + $read2 lines before kpfs's kill: not mid-way"
serve_kpfs "$scratch/serve2.log" --data-dir "$DATA" --override "listeners=PLAINTEXT://$BOOTSTRAP" \
    "${SERVE_ARGS[@]}"
wait_until 20 is_listening "$PORT" ||
    fail "kpfs did not listen on $PORT again in 20 s: $(tail -n 20 "$scratch/serve2.log")"

# 3. The app goes on to the end of the input: verify waits for every word's true count,
# then checks the sequences. (At kpfs's kill the app had not read all of its input, so
# the counts of the rest were committed to the restarted kpfs.)
verify "$N" 90 "" "$scratch/verify1.out" ||
    { app_tail "$scratch/app2.out" >&2; cat "$scratch/verify1.out" >&2; fail "the counts after the kills are wrong"; }

# The app's kill left a transaction with records in kpfs, which its restart aborted: the
# abort is in a transaction index (a read_committed reader that did not skip its records
# would have counted them twice above).
aborted_in_index() {
    local f
    for f in "$DATA"/wc-words-repartition-*/*.txnindex "$DATA"/wc-out-*/*.txnindex; do
        [ ! -s "$f" ] || return 0
    done
    return 1
}
aborted_in_index || fail "no aborted transaction in the transaction indexes of wc-words-repartition and wc-out"

# 4. Once the cleaner has compacted the changelog, the app killed again, M lines more,
# and the app restarted: it restores its counts from the compacted changelog.
changelog_cleaned() { cat "$scratch"/serve[12].log | grep -q 'cleaned partition=wc-counts-changelog'; }
wait_until 30 changelog_cleaned || fail "kpfs's cleaner did not compact the changelog in 30 s"
kill -9 "$app"
wait "$app" 2>/dev/null || true
timeout 60 "${WC[@]}" seed "$BOOTSTRAP" "$N" $((N + M)) >"$scratch/seed2.out" 2>&1 ||
    fail "seeding more failed: $(tail -n 20 "$scratch/seed2.out")"
start_app 3
verify $((N + M)) 60 "" "$scratch/verify2.out" ||
    { app_tail "$scratch/app3.out" >&2; cat "$scratch/verify2.out" >&2; fail "the counts after the restore are wrong"; }
grep -q 'stores are not empty' "$scratch/app3.out" ||
    fail "the app did not restore its store from the changelog: $(app_tail "$scratch/app3.out")"

# 5. The app stopped, the same checks on all that wc-out holds, and what is left in kpfs.
kill -TERM "$app"
wait_until 90 eval '! kill -0 "$app"' || fail "the app did not stop in 90 s after SIGTERM"
wait "$app" 2>/dev/null || true
app=
grep -q '^state NOT_RUNNING' "$scratch/app3.out" || fail "the app did not close cleanly: $(grep "^close " "$scratch/app3.out") $(app_tail "$scratch/app3.out")"
verify $((N + M)) 10 final "$scratch/verify3.out" ||
    { cat "$scratch/verify3.out" >&2; fail "the final counts are wrong"; }
grep '^ok: ' "$scratch/verify3.out"

# The internal topics as Streams created them (CreateTopics with configs): the changelog
# compacted, the repartition topic kept until Streams purges it.
overrides() { sort "$DATA/kpfs-topics/$1-0/topic.properties" | tr '\n' ' '; }
expect_eq "cleanup.policy=compact delete.retention.ms=100 message.timestamp.type=CreateTime min.cleanable.dirty.ratio=0.01 segment.ms=300 " \
    "$(overrides wc-counts-changelog)" "the changelog's config overrides"
expect_eq "cleanup.policy=delete message.timestamp.type=CreateTime retention.ms=-1 segment.bytes=52428800 " \
    "$(overrides wc-words-repartition)" "the repartition topic's config overrides"
echo "the app read $read1 lines before its kill, $read2 after its restart before kpfs's kill," \
    "$(lines_read "$scratch/app2.out") in all in its second run, $(lines_read "$scratch/app3.out") in its third" \
    "(of $N, then $M more; the lines of aborted transactions read again)"
echo "stream threads replaced after kpfs's kill: $(grep -c '^thread failed' "$scratch/app2.out" || true)"
matrix_row "$rows" streams-exactly-once-v2 pass \
    "word count (repartition, compacted changelog) exactly once across kill -9 of the app and of kpfs"

# 6. The streams group protocol (KIP-1071) is not served: the client says so.
timeout 90 "${WC[@]}" streams-protocol "$BOOTSTRAP" "$scratch/state-streams-protocol" \
    >"$scratch/streams-protocol.out" 2>&1 ||
    fail "the app with group.protocol=streams did not fail as expected: $(app_tail "$scratch/streams-protocol.out")"
reason=$(sed -n 's/^error: .*UnsupportedVersionException: //p' "$scratch/streams-protocol.out")
expect_contains "$reason" "The cluster does not support the STREAMS group protocol" "the stream thread's error"
matrix_row "$rows" streams-group-protocol unsupported \
    "group.protocol=streams (KIP-1071): kpfs does not serve StreamsGroupHeartbeat; the stream thread dies of \"$reason\""
