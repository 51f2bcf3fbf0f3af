# A line of which any piece is refused leaves nothing of itself in log, however it
# arrives: one write(2) the kernel splits into pieces (python's os.write, and the retry
# of the rest that cat, stdio and python's buffered files make after a short count), cat
# of a file with a 3 MB line, a line written in several write(2)s. The lines after it on
# the same descriptor are appended.
source "$(dirname "$0")/lib.sh"

mount_kpfs
new_data_dir scratch

# One write(2) of a 1.5 MB line: the kernel hands it over in 1 MiB pieces and answers
# with the count of the pieces before the refused one (or EFBIG); no prefix of the line
# becomes a record, neither then nor at close, and the next line is appended.
mkdir "$MNT/one"
python3 - "$MNT/one/log" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
try:
    os.write(fd, b'{"k":"' + b'x' * 1500000 + b'"}\n')
except OSError as e:
    assert e.errno == 27, e
os.write(fd, b"next\n")
os.close(fd)
EOF
# (head -c: a failure shows a short excerpt, not megabytes.)
expect_eq "next" "$(head -c 100 "$MNT/one/log")" "log after a 1.5 MB line in one write(2)"
expect_eq 1 "$(status_field one log_end_offset)" "log_end_offset after a 1.5 MB line"

# The same write(2) from a program that retries the rest after a short count, as cat,
# stdio and python's buffered files do: the resent rest starts with the refused line's
# tail and is refused, so the program hears EFBIG. The line before it is appended.
mkdir "$MNT/retry"
python3 - "$MNT/retry/log" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
data = b"good\n" + b"y" * 1500000 + b"\nafter\n"
done = 0
try:
    while done < len(data):
        done += os.write(fd, data[done:])
    sys.exit("the write of a 1.5 MB line succeeded")
except OSError as e:
    assert e.errno == 27, e
os.write(fd, b"next\n")
os.close(fd)
EOF
expect_eq $'good\nnext' "$(head -c 100 "$MNT/retry/log")" "log after a retried 1.5 MB line"
expect_eq 2 "$(status_field retry log_end_offset)" "log_end_offset after a retried 1.5 MB line"
expect_contains "$(cat "$MNT/.kpfs/errors")" "retry/log: this write carries more of a refused line, and nothing of that line is stored: The record batch size in the append to retry-0 is 1500074 bytes" ".kpfs/errors after the retry"

# cat of a file with a 3 MB line writes it in 1 MiB write(2)s (log's st_blksize). The
# first holds a line that fits and the start of the 3 MB line, the second is refused, cat
# stops, and nothing of the 3 MB line is stored, not even the start the first held.
mkdir "$MNT/cat"
{ head -c 1048000 /dev/zero | tr '\0' b; echo; head -c 3000000 /dev/zero | tr '\0' z; printf '\nafter\n'; } > "$scratch/big"
expect_errno "File too large" "cat '$scratch/big' >> '$MNT/cat/log'"
head -n 1 "$scratch/big" > "$scratch/first"
cmp "$scratch/first" "$MNT/cat/log" || fail "log after cat of a 3 MB line is not its first line"
expect_eq 1 "$(status_field cat log_end_offset)" "log_end_offset after cat of a 3 MB line"
expect_eq 1 "$(metric 'kpfs_refused_records_total{topic="cat",partition="0",reason="too_large"}')" "refused records after cat of a 3 MB line"

# A line in several write(2)s under max.message.bytes=1000: 600 bytes, then 600 more and
# its newline, refused; the next line is appended. A line refused before its newline
# came takes the writes that carry the rest of it with it.
mkdir "$MNT/small"
echo "max.message.bytes=1000" > "$MNT/small/config"
python3 - "$MNT/small/log" <<'EOF'
import os, sys
def refused(fd, data):
    try:
        os.write(fd, data)
    except OSError as e:
        assert e.errno == 27, e
        return
    sys.exit(f"a write of {data[:20]!r}... succeeded")
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"a" * 600)
refused(fd, b"a" * 600 + b"\n")
os.write(fd, b"next\n")
refused(fd, b"b" * 2000)
refused(fd, b"more of b")
refused(fd, b"end of b\nand a line that came with it\n")
os.write(fd, b"after\n")
os.close(fd)
EOF
expect_eq $'next\nafter' "$(cat "$MNT/small/log")" "log after lines refused in part"
expect_contains "$(cat "$MNT/.kpfs/errors")" "small/log: The record batch size in the append to small-0 is 1270 bytes which exceeds the maximum configured value of 1000." ".kpfs/errors after a line in pieces"

umount_kpfs
