# Consumer groups as the mount shows them: a kafka-python group of two consumers
# (tests/shell/group_view_client.py) and `.kpfs/groups/GROUP/` (state, members, offsets:
# kafka-consumer-groups.sh --describe's tables) agreeing with what the clients report;
# lag in .kpfs/metrics and the topic's status rising with appends and back to 0 once
# consumed; rmdir of the group refused while it has members (ENOTEMPTY, Kafka's text in
# .kpfs/errors) and deleting it once they left; the rest of .kpfs/groups read-only; the
# internal topic __consumer_offsets shown, readable and read-only.
source "$(dirname "$0")/lib.sh"

PY=$(kafka_python)
CLIENT=$KPFS_ROOT/tests/shell/group_view_client.py
mount_kpfs_listening
GDIR=$MNT/.kpfs/groups
G=view-group

mkdir "$MNT/gv-a" "$MNT/gv-b"
printf 'a%s\n' 1 2 3 4 5 >>"$MNT/gv-a/log"
printf 'b%s\n' 1 2 3 >>"$MNT/gv-b/log"
expect_eq "" "$(ls "$GDIR")" "ls .kpfs/groups before any group"

# The two consumers run in one python process, driven through its stdin and stdout.
coproc CONSUMERS { timeout 300 "$PY" "$CLIENT" "$BOOTSTRAP" "$G" gv-a gv-b 2>&1; }
consumers=$CONSUMERS_PID
trap 'kill "$consumers" 2>/dev/null || true; _kpfs_cleanup' EXIT
# ask COMMAND: sends COMMAND (none: only waits) and prints the answer's lines up to "ok".
ask() {
    local line answer=
    [ -z "${1:-}" ] || echo "$1" >&"${CONSUMERS[1]}"
    while IFS= read -r -t 120 -u "${CONSUMERS[0]}" line; do
        if [ "$line" == ok ]; then
            printf '%s' "$answer"
            return 0
        fi
        answer+=$line$'\n'
    done
    fail "the consumers did not answer ${1:-their start}: $answer"
}
ask >/dev/null
reported=$(ask consume)

# --- What the clients report, against the three files.
expect_eq "$G" "$(ls "$GDIR")" "ls .kpfs/groups"
expect_eq $'members\noffsets\nstate' "$(ls "$GDIR/$G")" "ls .kpfs/groups/$G"
members=$(grep '^member ' <<<"$reported")
[ "$(wc -l <<<"$members")" -eq 2 ] || fail "the clients report no two members: $reported"
generation=$(awk 'NR == 1 { print $4 }' <<<"$members")

state=$(cat "$GDIR/$G/state")
expect_eq "GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS GENERATION PROTOCOL-TYPE" \
    "$(head -n1 <<<"$state" | tr -s ' ')" "the header of state"
expect_eq "$G 127.0.0.1:$PORT (1) roundrobin Stable 2 $generation consumer" \
    "$(sed -n 2p <<<"$state" | tr -s ' ')" "the row of state"
# Kafka's columns: GROUP as wide as the coordinator's text (at least 25), then 25, 20, 15.
expect_eq 26 "$(head -n1 <<<"$state" | grep -bo 'COORDINATOR' | cut -d: -f1)" "where COORDINATOR starts"

expect_eq "GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT" \
    "$(head -n1 "$GDIR/$G/members" | tr -s ' ')" "the header of members"
expect_eq "$(awk -v g="$G" '{ print g, $2, "/127.0.0.1", $3, 1, $6 }' <<<"$members" | sort)" \
    "$(tail -n +2 "$GDIR/$G/members" | tr -s ' ' | sed 's/ $//' | sort)" "the members' rows"

# offsets: per partition the committed offset the client read back, the log end and the
# lag, with the member that has the partition.
offset_rows() {
    local topic part offset member client
    while read -r _ topic part offset; do
        read -r member client < <(awk -v a="$topic($part)" '$6 == a { print $2, $3 }' <<<"$members")
        echo "$G $topic $part $offset $offset 0 $member /127.0.0.1 $client"
    done < <(grep '^committed ' <<<"$reported") | sort
}
expect_eq $'committed gv-a 0 5\ncommitted gv-b 0 3' "$(grep '^committed ' <<<"$reported" | sort)" \
    "the offsets the clients committed"
expect_eq "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID" \
    "$(head -n1 "$GDIR/$G/offsets" | tr -s ' ')" "the header of offsets"
expect_eq "$(offset_rows)" "$(tail -n +2 "$GDIR/$G/offsets" | tr -s ' ' | sort)" "the offsets' rows"

# --- Lag: appends raise it in metrics, status and offsets; consuming brings it to 0.
lag_series="kpfs_consumer_group_lag{group=\"$G\",topic=\"gv-a\",partition=\"0\"}"
expect_eq 0 "$(metric "$lag_series")" "$lag_series"
expect_eq 5 "$(metric "kpfs_consumer_group_committed_offset{group=\"$G\",topic=\"gv-a\",partition=\"0\"}")" \
    "the committed offset in .kpfs/metrics"
expect_contains "$(cat "$MNT/.kpfs/metrics")" "# HELP kpfs_consumer_group_lag " ".kpfs/metrics"
printf 'a%s\n' 6 7 8 9 >>"$MNT/gv-a/log"
expect_eq 4 "$(metric "$lag_series")" "$lag_series after 4 appends"
expect_eq "$G committed_offset=5 lag=4" "$(status_field gv-a consumer_group)" "gv-a/status"
expect_eq "$G committed_offset=3 lag=0" "$(status_field gv-b consumer_group)" "gv-b/status"
expect_eq "5 9 4" "$(awk '$2 == "gv-a" { print $4, $5, $6 }' "$GDIR/$G/offsets")" "gv-a's row of offsets"
reported=$(ask consume)
expect_contains "$reported" "committed gv-a 0 9" "what the clients committed"
wait_until 10 metric_is "$lag_series" 0 || fail "$lag_series is $(metric "$lag_series") after consuming"
expect_eq "$G committed_offset=9 lag=0" "$(status_field gv-a consumer_group)" "gv-a/status after consuming"

# --- rmdir while the consumers are in the group: Kafka's NON_EMPTY_GROUP.
expect_errno "Directory not empty" "rmdir '$GDIR/$G'"
expect_contains "$(cat "$MNT/.kpfs/errors")" ".kpfs/groups/$G: The group $G is not empty." ".kpfs/errors"
[ -d "$GDIR/$G" ] || fail "the group went at a refused rmdir"

# --- Everything else in .kpfs/groups is read-only, with a reason in .kpfs/errors.
expect_errno "Operation not permitted" "mkdir '$GDIR/new-group'"
expect_rejection ".kpfs/groups/new-group"
expect_errno "Permission denied" "echo x > '$GDIR/$G/state'"
expect_rejection ".kpfs/groups/$G/state"
expect_errno "Operation not permitted" "touch '$GDIR/$G/notes'"
expect_rejection ".kpfs/groups/$G/notes"
expect_errno "Operation not permitted" "rm -f '$GDIR/$G/offsets'"
expect_rejection ".kpfs/groups/$G/offsets"
expect_errno "Operation not permitted" "mv '$GDIR/$G/members' '$GDIR/$G/m'"
expect_errno "No such file or directory" "rmdir '$GDIR/no-such-group'"

# --- The consumers leave: the group is Empty, keeps its offsets, and rmdir deletes it.
ask close >/dev/null
wait "$consumers" || fail "the consumers' script failed"
wait_until 10 grep -q ' Empty ' "$GDIR/$G/state" || fail "the group is not Empty: $(cat "$GDIR/$G/state")"
# No assignment strategy outside Stable (DescribeGroups).
[[ $(sed -n 2p "$GDIR/$G/state" | tr -s ' ') =~ ^"$G 127.0.0.1:$PORT (1) Empty 0 "[0-9]+" consumer"$ ]] ||
    fail "the row of the Empty group's state: $(cat "$GDIR/$G/state")"
expect_eq 1 "$(wc -l <"$GDIR/$G/members")" "lines of members without members"
expect_eq "$(printf '%s gv-a 0 9 9 0 - - -\n%s gv-b 0 3 3 0 - - -' "$G" "$G")" \
    "$(tail -n +2 "$GDIR/$G/offsets" | tr -s ' ' | sort)" "offsets of the Empty group"
rmdir "$GDIR/$G"
expect_eq "" "$(ls "$GDIR")" "ls .kpfs/groups after rmdir"
[ ! -e "$GDIR/$G" ] || fail "$GDIR/$G still exists"
! grep -q "group=\"$G\"" "$MNT/.kpfs/metrics" || fail ".kpfs/metrics still has the deleted group"
! grep -q '^consumer_group: ' "$MNT/gv-a/status" || fail "gv-a/status still has the deleted group"

# --- __consumer_offsets: a topic folder, readable, read-only.
OFFSETS=$MNT/__consumer_offsets
expect_contains "$(ls "$MNT")" "__consumer_offsets" "ls of the mount"
expect_contains "$(ls "$OFFSETS/segments")" "00000000000000000000.log" "ls __consumer_offsets/segments"
expect_eq "__consumer_offsets" "$(status_field __consumer_offsets topic)" "__consumer_offsets/status"
[ "$(status_field __consumer_offsets log_end_offset)" -gt 0 ] || fail "__consumer_offsets is empty"
"$KPFS" dump-log "$OFFSETS/segments/00000000000000000000.log" >/dev/null
cat "$OFFSETS/log" >/dev/null
end=$(status_field __consumer_offsets log_end_offset)
expect_errno "Operation not permitted" "echo x >> '$OFFSETS/log'"
expect_rejection "__consumer_offsets/log"
expect_errno "Operation not permitted" "echo retention.ms=1000 >> '$OFFSETS/config'"
expect_rejection "__consumer_offsets/config"
expect_errno "Operation not permitted" "echo 1 > '$OFFSETS/log_start_offset'"
expect_rejection "__consumer_offsets/log_start_offset"
expect_errno "Operation not permitted" "rmdir '$OFFSETS'"
expect_rejection "__consumer_offsets"
expect_eq "$end" "$(status_field __consumer_offsets log_end_offset)" "__consumer_offsets's log end after the refusals"
