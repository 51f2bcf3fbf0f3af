# Proof from outside kpfs: kafka-python (tests/shell/kafka_decode.py, in the venv that
# scripts/python-venv makes) decodes every batch of the segments a user's echo and cat
# wrote: a plain topic, a keyed topic with tombstones, a compacted topic after the cleaner
# ran, and a topic per compression codec. Every CRC32C is valid, and offsets, keys,
# values (tombstones as null) and headers are as written, timestamps within the write's
# time window; a flipped byte in a copy of a segment is reported as corrupt.
source "$(dirname "$0")/lib.sh"

PY=${KPFS_PYTHON:-$("$KPFS_ROOT/scripts/python-venv")}
DECODE=$KPFS_ROOT/tests/shell/kafka_decode.py
"$PY" -c 'import kafka.codec as c; assert c.has_snappy() and c.has_lz4() and c.has_zstd()' ||
    fail "$PY lacks kafka-python or its codec libraries (scripts/python-venv installs them)"

mount_kpfs --override log.cleaner.backoff.ms=200
new_data_dir scratch # a temp dir that cleanup removes

now_ms() { date +%s%3N; }
# rec OFFSET KEY VALUE: the record line kafka_decode.py prints, without its timestamp;
# KEY and VALUE are text, or None for null.
rec() {
    local k=None v=None
    [ "$2" == None ] || k="b'$2'"
    [ "$3" == None ] || v="b'$3'"
    printf "record offset=%s key=%s value=%s headers=[]\n" "$1" "$k" "$v"
}
# decoded TOPIC: kafka-python's lines for every segment of TOPIC in the data directory
# (kept in $scratch/TOPIC.out); the test fails if the decoder does.
decoded() {
    "$PY" "$DECODE" "$DATA/$1-0/"*.log >"$scratch/$1.out" 2>"$scratch/$1.err" ||
        fail "kafka-python on $1's segments: $(cat "$scratch/$1.err")"
}
# records TOPIC: the record lines without timestamps.
records() { grep '^record ' "$scratch/$1.out" | sed 's/ timestamp=[0-9-]*//'; }
# timestamps_within TOPIC FROM TO: every record's timestamp lies in [FROM, TO].
timestamps_within() {
    local bad
    bad=$(grep '^record ' "$scratch/$1.out" | sed 's/.* timestamp=\([0-9-]*\) .*/\1/' |
        awk -v from="$2" -v to="$3" '$1 < from || $1 > to')
    expect_eq "" "$bad" "timestamps of $1 outside the write's window [$2, $3]"
}
# codecs TOPIC: the codec of each batch, one line per distinct codec.
codecs() { grep '^batch ' "$scratch/$1.out" | sed 's/.* codec=\([a-z0-9]*\) .*/\1/' | sort -u; }

# --- A plain topic: five echos (a batch each) and one cat of three lines (one batch).
mkdir "$MNT/plain"
plain_from=$(now_ms)
for i in 1 2 3 4 5; do echo "plain-line-$i" >>"$MNT/plain/log"; done
printf 'cat-line-%s\n' 1 2 3 >"$scratch/three"
cat "$scratch/three" >>"$MNT/plain/log"
plain_to=$(now_ms)

# --- A keyed topic with tombstones (null.marker gives a null value).
mkdir "$MNT/keyed"
printf 'parse.key=true\nkey.separator=:\nnull.marker=NULL\n' >"$MNT/keyed/config"
keyed_from=$(now_ms)
echo "k1:v1" >>"$MNT/keyed/log"
echo "k2:v2" >>"$MNT/keyed/log"
echo "k1:NULL" >>"$MNT/keyed/log"
printf 'k3:v3\nk2:NULL\nk4:value with spaces\n' >"$scratch/keyed"
cat "$scratch/keyed" >>"$MNT/keyed/log"
keyed_to=$(now_ms)

# --- A compacted topic, after the cleaner's pass over its first segment.
mkdir "$MNT/compacted"
printf '%s\n' cleanup.policy=compact parse.key=true key.separator=: null.marker=NULL \
    min.cleanable.dirty.ratio=0.01 segment.ms=1000 >"$MNT/compacted/config"
compacted_from=$(now_ms)
for kv in a:1 b:1 a:2 b:NULL c:1; do echo "$kv" >>"$MNT/compacted/log"; done
sleep 1.1 # scenario time: past segment.ms, so the next append rolls segment 0
echo "d:1" >>"$MNT/compacted/log"
compacted_to=$(now_ms)
cleaned() { grep -q 'clean offsets \[0, 5)' "$MNT/compacted/events"; }
wait_until 20 cleaned || fail "no cleaning pass [0, 5): $(grep 'clean' "$MNT/compacted/events")"

# --- A topic per codec: one echo, then a cat of 100 KB of lines (one write, one batch,
# more than one snappy block of 32 KiB and one lz4 block of 64 KiB).
for i in $(seq 1 1000); do printf 'line %04d of a compressible payload: %s\n' "$i" "$(printf '%060d' "$i")"; done \
    >"$scratch/big"
declare -A codec_from codec_to
for c in gzip snappy lz4 zstd; do
    mkdir "$MNT/$c"
    echo "compression.type=$c" >"$MNT/$c/config"
    codec_from[$c]=$(now_ms)
    echo "first line of $c" >>"$MNT/$c/log"
    cat "$scratch/big" >>"$MNT/$c/log"
    codec_to[$c]=$(now_ms)
done
umount_kpfs

# --- What kafka-python reads back.
decoded plain
want=$(for i in 1 2 3 4 5; do rec $((i - 1)) None "plain-line-$i"; done
    for i in 1 2 3; do rec $((i + 4)) None "cat-line-$i"; done)
expect_eq "$want" "$(records plain)" "plain topic as kafka-python decodes it"
timestamps_within plain "$plain_from" "$plain_to"
expect_eq "none" "$(codecs plain)" "codecs of the plain topic"
# One batch per write(2): five echos, then a batch of three from offset 5.
expect_eq $'0 0 1\n1 1 1\n2 2 1\n3 3 1\n4 4 1\n5 7 3' \
    "$(grep '^batch ' "$scratch/plain.out" | sed 's/.* base=\([0-9]*\) last=\([0-9]*\) count=\([0-9]*\) .*/\1 \2 \3/')" \
    "batches of the plain topic (base last count)"

decoded keyed
want=$(rec 0 k1 v1; rec 1 k2 v2; rec 2 k1 None; rec 3 k3 v3; rec 4 k2 None; rec 5 k4 "value with spaces")
expect_eq "$want" "$(records keyed)" "keyed topic as kafka-python decodes it"
timestamps_within keyed "$keyed_from" "$keyed_to"

decoded compacted
# a:1 and b:1 are superseded; the tombstone of b stays (delete.retention.ms is a day), its
# batch now carrying the delete horizon in its baseTimestamp, as Kafka's cleaner writes it.
want=$(rec 2 a 2; rec 3 b None; rec 4 c 1; rec 5 d 1)
expect_eq "$want" "$(records compacted)" "compacted topic as kafka-python decodes it"
# The records keep their own timestamps, also where baseTimestamp is the horizon.
timestamps_within compacted "$compacted_from" "$compacted_to"
expect_eq $'2 no\n3 yes\n4 no\n5 no' \
    "$(grep '^batch ' "$scratch/compacted.out" | sed 's/.* base=\([0-9]*\) .* delete_horizon=\([a-z]*\)$/\1 \2/')" \
    "delete horizons of the compacted topic's batches"

big_records=$(awk '{ printf "record offset=%d key=None value=b'\''%s'\'' headers=[]\n", NR, $0 }' "$scratch/big")
for c in gzip snappy lz4 zstd; do
    decoded "$c"
    expect_eq "$(rec 0 None "first line of $c")"$'\n'"$big_records" "$(records "$c")" \
        "$c topic as kafka-python decodes it"
    timestamps_within "$c" "${codec_from[$c]}" "${codec_to[$c]}"
    expect_eq "$c" "$(codecs "$c")" "codecs of the $c topic's batches"
done

# --- A flipped byte in a copy of a segment: kafka-python reports the CRC32C mismatch,
# in an uncompressed batch (a value byte of the first record) and in a zstd one.
# flip FILE POS: inverts the byte at POS.
flip() {
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "\\$(printf %03o $((b ^ 0xff)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
expect_corrupt() {
    local out status=0
    out=$("$PY" "$DECODE" "$1" 2>&1 >/dev/null) || status=$?
    [ "$status" -eq 1 ] || fail "kafka-python exited $status on $1 with a flipped byte: $out"
    expect_contains "$out" "CORRUPT: $1: batch at base offset $2: CRC32C mismatch" "kafka-python on $1"
}
cp "$DATA/plain-0/00000000000000000000.log" "$scratch/plain.log"
flip "$scratch/plain.log" 70
expect_corrupt "$scratch/plain.log" 0
cp "$DATA/zstd-0/00000000000000000000.log" "$scratch/zstd.log"
size=$(stat -c %s "$scratch/zstd.log")
flip "$scratch/zstd.log" $((size - 10))
expect_corrupt "$scratch/zstd.log" 1
