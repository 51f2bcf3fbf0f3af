# Side-by-side checks of kpfs against a real Kafka broker, for the tests that run the same
# thing on both (t_kafka_tools.sh, t_kafka_diff_wire.sh, t_kafka_txn_diff.sh). Source
# after kafka_lib.sh, with $W a work directory and, before the checks run, $K (Kafka's
# bin/), $KPFS_BOOTSTRAP and $KPFS_LOGS (kpfs's listener and data directory) set beside
# kafka_lib.sh's variables.
#
# Each check keeps $W/NAME.kafka and $W/NAME.kpfs; the test declares
#   declare -A KNOWN=([NAME]="why kpfs differs there" ...)
# and ends with side_by_side_verdict, which fails on a difference not in KNOWN and on a
# KNOWN one that went away (remove it then).

declare -A DIFFERS=()
CHECKS=()
# The sides both() runs on. SIDES=(kafka), for a test being written against Kafka before
# kpfs can answer, runs each check on Kafka alone: nothing is compared then.
SIDES=(kafka kpfs)

# side_env SIDE: the environment a command line runs in on SIDE (kafka or kpfs): K, the
# tools; BOOTSTRAP; LOGS, the log directory (Kafka's log.dirs, kpfs's data directory).
side_env() {
    case $1 in
        kafka) echo "K=$K BOOTSTRAP=$KAFKA_BOOTSTRAP LOGS=$KAFKA_LOG_DIRS" ;;
        kpfs) echo "K=$K BOOTSTRAP=$KPFS_BOOTSTRAP LOGS=$KPFS_LOGS" ;;
    esac
}

# run_side SIDE OUT INPUT CMDLINE: runs CMDLINE with bash on SIDE, INPUT on its stdin,
# stdout and stderr to OUT, then its exit status as a last line "exit N".
run_side() {
    local side=$1 out=$2 input=$3 cmd=$4 status=0
    # shellcheck disable=SC2046
    printf '%s' "$input" | env $(side_env "$side") timeout 120 bash -c "$cmd" >"$out" 2>&1 || status=$?
    echo "exit $status" >>"$out"
}

# normalise SIDE: what must differ between two brokers, made the same: times, ids,
# bootstrap ports, log directories, generated group and member names (a member id before
# a group name: a member id's UUID may start with digits that look like a group's).
normalise() {
    local boot logs
    case $1 in
        kafka) boot=$KAFKA_BOOTSTRAP logs=$KAFKA_LOG_DIRS ;;
        kpfs) boot=$KPFS_BOOTSTRAP logs=$KPFS_LOGS ;;
    esac
    sed -E -e "s#$logs#LOGS#g" -e "s#$boot#BOOTSTRAP#g" \
        -e 's/^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:,]+\]/[TIME]/' \
        -e 's/TopicId: [A-Za-z0-9_-]{22}/TopicId: ID/g' \
        -e 's/[A-Za-z0-9._-]+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/MEMBER-ID/g' \
        -e 's/console-consumer-[0-9]+/console-consumer-N/g' \
        -e 's/(CreateTime|LogAppendTime|timestamp): [0-9]+/\1: T/g' -e 's/crc: [0-9]+/crc: C/g' \
        -e 's/maxTimestamp: [0-9]+/maxTimestamp: T/g' \
        -e 's/ position: [0-9]+ (.*) size: [0-9]+ / position: P \1 size: S /'
}

# both NAME [--stdin TEXT] CMDLINE: CMDLINE on Kafka and on kpfs at once; their normalised
# outputs (stdout, stderr, exit status) are kept as $W/NAME.{kafka,kpfs} and compared.
both() {
    local name=$1 input='' side pids=()
    shift
    if [ "$1" == --stdin ]; then input=$2; shift 2; fi
    CHECKS+=("$name")
    for side in "${SIDES[@]}"; do
        run_side "$side" "$W/$name.$side.raw" "$input" "$1" &
        pids+=($!)
    done
    wait "${pids[@]}"
    for side in "${SIDES[@]}"; do normalise "$side" <"$W/$name.$side.raw" >"$W/$name.$side"; done
    [ "${#SIDES[@]}" -eq 1 ] || cmp -s "$W/$name.kafka" "$W/$name.kpfs" || DIFFERS[$name]=1
}

# compare NAME KAFKA_FILE KPFS_FILE: a check of two outputs made otherwise.
compare() {
    CHECKS+=("$1")
    cat "$2" >"$W/$1.kafka"
    cat "$3" >"$W/$1.kpfs"
    cmp -s "$W/$1.kafka" "$W/$1.kpfs" || DIFFERS[$1]=1
}

# same NAME: fails now unless NAME's outputs were the same (for checks later ones build on).
same() {
    [ -z "${DIFFERS[$1]:-}" ] || fail "$1: kpfs differs from Kafka: $(diff "$W/$1.kafka" "$W/$1.kpfs")"
}

# side_by_side_verdict: every check that differs is in KNOWN, every one in KNOWN still
# differs, and KNOWN names only checks that ran.
side_by_side_verdict() {
    local name unexpected=() fixed=()
    for name in "${CHECKS[@]}"; do
        if [ -n "${DIFFERS[$name]:-}" ] && [ -z "${KNOWN[$name]:-}" ]; then unexpected+=("$name"); fi
        if [ -z "${DIFFERS[$name]:-}" ] && [ -n "${KNOWN[$name]:-}" ]; then fixed+=("$name"); fi
    done
    for name in "${!KNOWN[@]}"; do
        # grep reads it all (no -q): under pipefail, printf killed by SIGPIPE after an early
        # match would fail the pipeline.
        printf '%s\n' "${CHECKS[@]}" | grep -xF "$name" >/dev/null || fail "KNOWN names $name, which no check has"
    done
    if [ "${#unexpected[@]}" -gt 0 ]; then
        # What kpfs logged is the only trace left of a difference that depends on timing
        # (a group's rebalances): its coordinators' lines and its warnings. Printed before
        # the differences, which the test runner's tail of the output must keep.
        echo "kpfs's log, its coordinators' lines and warnings (the last 60):" >&2
        grep -E 'coordinator|WARN|ERROR' "$KPFS_LOGS.log" 2>/dev/null | tail -n 60 >&2 || true
        for name in "${unexpected[@]}"; do
            echo "kpfs differs from Kafka 4.3.1 in $name (< Kafka, > kpfs):" >&2
            diff "$W/$name.kafka" "$W/$name.kpfs" >&2 || true
        done
        fail "new differences from Kafka 4.3.1: ${unexpected[*]}"
    fi
    [ "${#fixed[@]}" -eq 0 ] || fail "no longer different from Kafka 4.3.1 (remove from KNOWN): ${fixed[*]}"
}
