# .kpfs/config lists the dynamic overrides as key=value and every other broker config as
# a comment with its value and source, including mount overrides; a static config written
# there is refused with Kafka's "Cannot update these configs dynamically" text, a dynamic
# one (log.segment.delete.delay.ms) is accepted and survives a remount; a Kafka broker
# config kpfs does not act on is kept at Kafka's level (per-broker only for
# sasl.kerberos.min.time.before.relogin), marked as having no effect, and survives a remount.
# A new data directory starts with the cluster-wide min.insync.replicas=1 of a new Kafka 4.x
# cluster (ELR), which Kafka's words refuse to remove or to set per broker; a `>` rewrite
# that does not name it keeps it.
source "$(dirname "$0")/lib.sh"

mount_kpfs --override log.retention.check.interval.ms=500
BROKER=$MNT/.kpfs/config

grep -qx "# log.retention.check.interval.ms=500 (STATIC_BROKER_CONFIG, read-only)" "$BROKER" || fail "override not listed: $(grep retention.check "$BROKER")"
grep -qx "# log.segment.delete.delay.ms=60000 (DEFAULT_CONFIG)" "$BROKER" || fail "default log.segment.delete.delay.ms not listed"
# A new data directory's one dynamic override: the cluster-wide min.insync.replicas a new
# Kafka 4.x cluster's controller writes (ELR), which cannot go, nor be set per broker.
overrides=$(grep -v '^#' "$BROKER" | head -n 3 || true)
expect_eq "min.insync.replicas=1" "$overrides" "the dynamic overrides of a new data directory"
n=$(wc -l < "$MNT/.kpfs/errors")
expect_errno "Invalid argument" "echo -min.insync.replicas >> '$BROKER'"
expect_contains "$(tail -n +$((n + 1)) "$MNT/.kpfs/errors" | cut -d' ' -f2-)" \
    ".kpfs/config: Cluster-level min.insync.replicas cannot be removed while ELR is enabled." ".kpfs/errors"
# A rewrite that does not name it keeps it.
: >"$BROKER"
expect_errno "Invalid argument" "printf '# per-broker overrides\nmin.insync.replicas=1\n' >> '$BROKER'"
expect_contains "$(tail -n 2 "$MNT/.kpfs/errors")" \
    "Broker-level min.insync.replicas cannot be altered while ELR is enabled." ".kpfs/errors"
expect_eq "min.insync.replicas=1" "$(grep -v '^#' "$BROKER")" ".kpfs/config after the refused changes"

# ms_since START_NS: milliseconds elapsed since START_NS ($(date +%s%N)).
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
# A config write is answered at once, not after a background thread's sleep (the mount
# keeps the default log.cleaner.backoff.ms, 15 s). Checked last, so the rest still runs.
slow=""
prompt() { [ "$2" -lt 3000 ] || slow+="$1 took $2 ms; "; }

# Static: refused, named in Kafka's wording, value unchanged.
before=$(cat "$BROKER")
t0=$(date +%s%N)
n=$(wc -l < "$MNT/.kpfs/errors")
expect_errno "Invalid argument" "echo log.retention.check.interval.ms=1000 >> '$BROKER'"
prompt "the refused write of log.retention.check.interval.ms" "$(ms_since "$t0")"
expect_contains "$(tail -n +$((n + 1)) "$MNT/.kpfs/errors" | cut -d' ' -f2-)" \
    ".kpfs/config: Cannot update these configs dynamically: [log.retention.check.interval.ms]" ".kpfs/errors"
expect_eq "$before" "$(cat "$BROKER")" ".kpfs/config after a refused static change"

# Dynamic (per Kafka's DynamicLogConfig, despite the seed's notes): accepted.
t0=$(date +%s%N)
echo "log.segment.delete.delay.ms=5000" >> "$BROKER"
prompt "the write of log.segment.delete.delay.ms=5000" "$(ms_since "$t0")"
grep -qx "log.segment.delete.delay.ms=5000" "$BROKER" || fail "log.segment.delete.delay.ms not updated"
mkdir "$MNT/t"
grep -q "^# file.delete.delay.ms=5000 " "$MNT/t/config" || fail "topic default file.delete.delay.ms does not follow: $(grep file.delete "$MNT/t/config")"

# Per-broker only, as Kafka's: refused at the cluster-wide level, kept after the header.
RELOGIN=sasl.kerberos.min.time.before.relogin
expect_errno "Invalid argument" "echo $RELOGIN=5000 >> '$BROKER'"
expect_contains "$(tail -n 2 "$MNT/.kpfs/errors")" \
    "Cannot update these configs at default cluster level, broker id must be specified: [$RELOGIN]" ".kpfs/errors"
grep -qx "# $RELOGIN=60000 (DEFAULT_CONFIG, no effect in kpfs)" "$BROKER" || fail "$RELOGIN not listed: $(grep relogin "$BROKER")"
printf '# per-broker overrides\n%s=5000\n' "$RELOGIN" >> "$BROKER"
per_broker=$(sed -n '/^# per-broker overrides$/,/^# defaults$/p' "$BROKER")
expect_eq $'# per-broker overrides\n'"$RELOGIN=5000"$'\n'"# $RELOGIN has no effect in kpfs"$'\n# defaults' "$per_broker" \
    "the per-broker section of .kpfs/config"

umount_kpfs
remount_kpfs --override log.retention.check.interval.ms=500
grep -qx "$RELOGIN=5000" "$BROKER" || fail "$RELOGIN=5000 lost across remount: $(grep relogin "$BROKER")"
grep -qx "log.segment.delete.delay.ms=5000" "$BROKER" || fail "log.segment.delete.delay.ms=5000 lost across remount: $(grep delete.delay "$BROKER")"
grep -q "^# file.delete.delay.ms=5000 " "$MNT/t/config" || fail "topic default file.delete.delay.ms after remount: $(grep file.delete "$MNT/t/config")"
umount_kpfs
[ -z "$slow" ] || fail "slow .kpfs/config writes: $slow"
