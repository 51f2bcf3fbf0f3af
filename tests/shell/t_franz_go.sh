# franz-go's own pkg/kgo integration tests (v1.22.3, the module's test files) against
# `kpfs serve`, as Kafka-compatible brokers prove themselves: with a replication factor of 1
# and the suite's own partition counts (its temporary topics have 7, 11 or 31 partitions,
# some tests 2 or 3). What fails or is skipped must be exactly
# franz_go_kgo_tests.tsv, each with its reason; a listed test that passes fails the check,
# so the list shrinks as kpfs grows (docs/KAFKA-PROTOCOL.md, "franz-go's own tests"). Rows
# go to the client matrix as franz-go-1.22.3.tsv.
source "$(dirname "$0")/lib.sh"

KGO_TEST=$KPFS_ROOT/target/franz-go-1.22.3/kgo.test
[ -x "$KGO_TEST" ] || fail "no $KGO_TEST (scripts/setup builds it with scripts/franz-go)"
command -v go >/dev/null || fail "no go on PATH (test2json reads the test binary's output)"
LIST=$KPFS_ROOT/tests/shell/franz_go_kgo_tests.tsv
matrix_dir=${KPFS_CLIENT_MATRIX_DIR:-$KPFS_ROOT/target/client-matrix}
mkdir -p "$matrix_dir"
MATRIX=$matrix_dir/franz-go-1.22.3.tsv
: >"$MATRIX"

new_data_dir scratch
new_data_dir data
serve_kpfs_listening "$scratch/kpfs.log" "$data"

# kgo_tests OUT ARGS...: the kgo test binary on $BOOTSTRAP, its events as test2json lines in
# OUT. Run from its package's folder, as `go test` runs it. KGO_TEST_RECORDS is the
# suite's own default, 500000 records through TestGroupETL's and TestTxnEtl's chains of
# groups: it fits the budget and so is not lowered. On two cores and a debug kpfs the whole
# suite takes about 75 s, TestGroupETL and TestTxnEtl about 45 and 27 s of it, side by
# side. It took over 600 s when a debug assertion of the topic's stream order checked every
# run on each append (quadratic in a busy topic's partition switches): this suite's time
# is the first sign of such a cost, and SUITE_DEADLINE stops a hang. The log level
# "none" keeps the clients' own logging out (each test's errors are still printed).
kgo_tests() {
    local out=$1
    shift
    (cd "$KPFS_ROOT/target/franz-go-1.22.3/src/pkg/kgo" &&
        KGO_SEEDS=$BOOTSTRAP KGO_TEST_RF=1 KGO_LOG_LEVEL=none \
            KGO_TEST_RECORDS=${records:-500000} \
            go tool test2json -t "$KGO_TEST" -test.v=test2json "$@" >"$out" 2>&1) || true
}

SUITE_DEADLINE=10m

# The listed failures run alone, with a deadline and a thousand records each: a failing
# test may wait forever (TestTxnEtl's consumers did, for the records of a transactional
# producer kpfs refused) or log per record. None is listed now; once one passes, it runs
# with the others.
listed_failures=$(awk -F'\t' '!/^#/ && $2 == "fail" { print $1 }' "$LIST" | paste -sd'|')
if [ -n "$listed_failures" ]; then
    kgo_tests "$scratch/main.json" -test.timeout "$SUITE_DEADLINE" -test.skip "^($listed_failures)\$"
    records=1000 kgo_tests "$scratch/listed-failures.json" -test.timeout 30s \
        -test.run "^($listed_failures)\$"
else
    kgo_tests "$scratch/main.json" -test.timeout "$SUITE_DEADLINE"
    : >"$scratch/listed-failures.json"
fi

kill -0 "$SERVE_PID" 2>/dev/null ||
    fail "kpfs serve died during the suite: $(tail -n 20 "$scratch/kpfs.log")"
python3 "$KPFS_ROOT/tests/shell/franz_go_verdict.py" "$LIST" "$scratch/main.json" \
    "$scratch/listed-failures.json" "$MATRIX"

kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || fail "kpfs serve did not stop cleanly: $(tail -n 20 "$scratch/kpfs.log")"
