# KafkaJS 2.2.4 (Node) against `kpfs serve`: producers with acks -1, the idempotent
# producer, GZIP (its other codecs are plugin packages: rows `unsupported`), consumers from
# the beginning and from a seek offset, a consumer group of two that rebalances when one
# leaves and resumes from its commits, the admin client, and a transactional producer that
# commits and aborts (with a group's offset in its transactions) read by a read_committed
# consumer (tests/clients/kafkajs/check.js checks each against what was sent). It writes
# its rows of the client matrix (scripts/client-matrix).
source "$(dirname "$0")/lib.sh"

kafkajs=$KPFS_ROOT/tests/clients/kafkajs
command -v node >/dev/null || fail "no node (Debian's nodejs; scripts/setup installs it)"
[ -d "$kafkajs/node_modules/kafkajs" ] || fail "no KafkaJS in $kafkajs/node_modules (scripts/setup runs npm ci there)"
new_data_dir scratch
new_data_dir data
# Without Kafka's 3 s wait for more members before a new group's first generation (Kafka's
# own integration tests set the same): KafkaJS's consumers, and its admin's setOffsets,
# are each a group's first member.
serve_kpfs_listening "$scratch/serve.log" "$data" --override group.initial.rebalance.delay.ms=0

rows=$(matrix_file kafkajs-2.2.4)
status=0
timeout 150 node "$kafkajs/check.js" "$BOOTSTRAP" "$rows" >"$scratch/out" 2>&1 || status=$?
cat "$scratch/out"
if [ "$status" -ne 0 ]; then
    # Last, where run.sh's excerpt of a failed test shows them.
    grep '^FAIL' "$scratch/out" >&2 || true
    fail "KafkaJS's checks failed (see above)"
fi
expect_contains "$(node -p "require('$kafkajs/node_modules/kafkajs/package.json').version")" 2.2.4 "KafkaJS's version"
# Every scenario has its row.
expect_eq 25 "$(grep -c $'\tpass\t' "$rows")" "passing rows of KafkaJS"
expect_eq 3 "$(grep -c $'\tunsupported\t' "$rows")" "unsupported rows of KafkaJS (its codec plugins)"
expect_eq $'transactions\tpass\t' "$(grep '^transactions	' "$rows")" "the transactions row"
# kpfs logged no warning or error while serving it.
! grep -E ' (WARN|ERROR) ' "$scratch/serve.log" || fail "kpfs logged warnings serving KafkaJS"
