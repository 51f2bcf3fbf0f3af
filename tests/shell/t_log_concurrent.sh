# Eight processes appending to the same log at once, one write(2) per line, lose,
# duplicate, tear or reorder nothing: all 16000 lines are present exactly once, intact,
# and each writer's lines keep the order it wrote them in.
source "$(dirname "$0")/lib.sh"

WRITERS=8
LINES=2000
PAD=abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ

mount_kpfs
mkdir "$MNT/c"
new_data_dir scratch # a temp dir that cleanup removes

# One bash process per writer; printf on fd 3 is one write(2) per line (bash flushes
# builtin output per line).
writer() {
    local i=$1 n
    exec 3>>"$MNT/c/log"
    for ((n = 0; n < LINES; n++)); do
        printf 'w%d-%d-%s\n' "$i" "$n" "$PAD" >&3
    done
    exec 3>&-
}
pids=()
for ((i = 0; i < WRITERS; i++)); do
    writer "$i" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "writer $p failed"; done

cat "$MNT/c/log" > "$scratch/got"
expect_eq $((WRITERS * LINES)) "$(wc -l < "$scratch/got")" "line count"
expect_eq $((WRITERS * LINES)) "$(grep '^log_end_offset:' "$MNT/c/status" | cut -d' ' -f2)" "log_end_offset"

# Every expected line exactly once (intact lines only can match).
for ((i = 0; i < WRITERS; i++)); do
    for ((n = 0; n < LINES; n++)); do printf 'w%d-%d-%s\n' "$i" "$n" "$PAD"; done
done | sort > "$scratch/want"
dups=$(sort "$scratch/got" | uniq -c | awk '$1 != 1' | head -n 5)
expect_eq "" "$dups" "lines appearing more than once"
sort "$scratch/got" | cmp -s - "$scratch/want" || fail "the set of lines differs: $(sort "$scratch/got" | diff - "$scratch/want" | head -n 10)"

# Per-writer order is preserved.
seq 0 $((LINES - 1)) > "$scratch/seq"
for ((i = 0; i < WRITERS; i++)); do
    grep "^w$i-" "$scratch/got" | cut -d- -f2 | cmp -s - "$scratch/seq" || fail "writer $i's lines are out of order"
done

umount_kpfs
