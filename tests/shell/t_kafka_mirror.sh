# docs/SCALING.md's one-topic mirror: `kcat -C | kcat -P` copies a topic from one kpfs
# (`kpfs serve`) to another, keys, values and order intact: values holding newlines, tabs
# and the separators of kpfs's own rendering, null values (tombstones) and null keys. The
# pipe's message and key delimiters are bytes the data does not hold (\x1e, \x1f), and -Z
# on the producing side turns the empty key kcat prints for a null key back into null
# (which is why the data has no empty keys or values: the pipe cannot tell them from null).
source "$(dirname "$0")/lib.sh"

command -v kcat >/dev/null || fail "no kcat (Debian's package kcat; .ci/run installs it)"
new_data_dir scratch
new_data_dir source_dir
new_data_dir target_dir
serve_kpfs_listening "$scratch/source.log" "$source_dir"
SOURCE=$BOOTSTRAP
source_pid=$SERVE_PID
serve_kpfs_listening "$scratch/target.log" "$target_dir"
TARGET=$BOOTSTRAP
target_pid=$SERVE_PID

# 1000 records: key-I and a value, with every 7th value null, every 11th key null, and
# some values of several lines or with tabs, ':' and '|'.
for i in $(seq 0 999); do
    key="key-$i"
    value="value $i"
    [ $((i % 11)) -eq 0 ] && key=""
    [ $((i % 7)) -eq 0 ] && value=""
    [ $((i % 5)) -eq 1 ] && value="line one of $i"$'\n'"line two	tab:colon|bar"
    printf '%s\x1f%s\x1e' "$key" "$value"
done >"$scratch/records"
timeout 60 kcat -b "$SOURCE" -q -P -t orders -K '\x1f' -D '\x1e' -Z "$scratch/records" -l

# The mirror: everything up to the source's end, into a topic the target creates on use.
timeout 60 kcat -b "$SOURCE" -q -C -t orders -o beginning -e -K '\x1f' -D '\x1e' |
    timeout 60 kcat -b "$TARGET" -q -P -t orders -K '\x1f' -D '\x1e' -Z

# Both sides as kcat sees them: offset, key and value with their lengths (-1 for null), so
# no byte of the data can fake a boundary.
dump() { timeout 60 kcat -b "$1" -q -C -t orders -o beginning -e -f '%o %K:%k %S:%s\n' >"$2"; }
dump "$SOURCE" "$scratch/source.out"
dump "$TARGET" "$scratch/target.out"
expect_eq 1000 "$(grep -c '^[0-9]* -\?[0-9]*:' "$scratch/source.out")" "records in the source dump"
expect_eq "999 7:key-999 9:value 999" "$(tail -n1 "$scratch/source.out")" "the source's last record"
grep -q '^0 -1: -1:$' "$scratch/source.out" || fail "record 0 has not a null key and a null value"
cmp "$scratch/source.out" "$scratch/target.out" ||
    fail "the mirror differs: $(diff "$scratch/source.out" "$scratch/target.out" | head -n 10)"

for pid in "$source_pid" "$target_pid"; do
    kill -TERM "$pid"
    wait "$pid" || fail "kpfs serve $pid did not stop cleanly"
done
