# IBM's sarama 1.61.1 (Go) against `kpfs serve`: sync and async producers with keys and
# headers, each codec, the idempotent producer, consumers from the oldest, the newest and a
# given offset, a consumer group of two that rebalances when one leaves and resumes from
# its commits, the cluster admin, and a transactional producer that commits and aborts
# (with a group's offset in its transactions) read by read_committed and read_uncommitted
# consumers (tests/clients/sarama/main.go checks each against what was sent). Twice at once: with sarama's default config.Version (2.8.0) and with the
# newest it knows (sarama narrows each request to the versions kpfs's ApiVersions lists).
# Each run writes its rows of the client matrix (scripts/client-matrix).
source "$(dirname "$0")/lib.sh"

command -v go >/dev/null || fail "no go toolchain (the Go module proxy brings sarama; scripts/setup checks for go)"
new_data_dir scratch
new_data_dir data
# Without Kafka's 3 s wait for more members before a new group's first generation (Kafka's
# own integration tests set the same): each consumer here is a group's first member.
serve_kpfs_listening "$scratch/serve.log" "$data" --override group.initial.rebalance.delay.ms=0

(cd "$KPFS_ROOT/tests/clients/sarama" && go build -mod=readonly -o "$scratch/sarama-check" .) ||
    fail "building tests/clients/sarama failed"

default_rows=$(matrix_file sarama-1.61.1)
newest_rows=$(matrix_file sarama-1.61.1-v4.3.1)
timeout 120 "$scratch/sarama-check" -bootstrap "$BOOTSTRAP" -prefix default -matrix "$default_rows" \
    >"$scratch/default.out" 2>&1 &
default_run=$!
timeout 120 "$scratch/sarama-check" -bootstrap "$BOOTSTRAP" -prefix newest -version max -matrix "$newest_rows" \
    >"$scratch/newest.out" 2>&1 &
newest_run=$!
status=0
wait "$default_run" || status=1
wait "$newest_run" || status=$((status + 2))
cat "$scratch/default.out" "$scratch/newest.out"
if [ "$status" -ne 0 ]; then
    # Last, where run.sh's excerpt of a failed test shows them.
    grep -H '^FAIL' "$scratch/default.out" "$scratch/newest.out" >&2 || true
    fail "sarama's checks failed (see above; status $status: 1 default version, 2 newest, 3 both)"
fi
expect_contains "$(cat "$scratch/default.out")" "config.Version 2.8.0" "the default run"
expect_contains "$(cat "$scratch/newest.out")" "config.Version 4.3.1" "the newest run"
# Every scenario has its row, in both runs, and passed.
for rows in "$default_rows" "$newest_rows"; do
    expect_eq 28 "$(grep -c $'\tpass\t' "$rows")" "passing rows of $rows"
    expect_eq 28 "$(wc -l <"$rows")" "rows of $rows"
done
expect_eq $'transactions\tpass\t' "$(grep '^transactions	' "$default_rows")" "the transactions row"
# kpfs logged no warning or error while serving them.
! grep -E ' (WARN|ERROR) ' "$scratch/serve.log" || fail "kpfs logged warnings serving sarama"
