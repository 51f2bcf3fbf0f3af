# Reads anywhere in log return the full count asked for (or up to the end of the
# stream) and the bytes a plain file would, whatever the descriptor read before: pread
# after a small read, random preads between sequential reads, dd with an offset.
source "$(dirname "$0")/lib.sh"

mount_kpfs

mkdir "$MNT/t"
new_data_dir scratch # a temp dir that cleanup removes
in=$scratch/in
python3 - "$in" <<'PY'
import random, sys
rng = random.Random(7)
with open(sys.argv[1], "wb") as f:
    for i in range(60000):
        f.write(b"%d %s\n" % (i, bytes([97 + i % 26]) * rng.randrange(150)))
PY
cat "$in" >> "$MNT/t/log"
cmp "$in" "$MNT/t/log" || fail "log differs from what was appended"

python3 - "$in" "$MNT/t/log" <<'PY'
import os, random, sys
want = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_RDONLY)
# The case that was short: a small read, then a larger pread from the start.
assert os.read(fd, 100) == want[:100]
got = os.pread(fd, 1000, 0)
assert got == want[:1000], "pread(1000, 0) after read(100) gave %d bytes" % len(got)
rng = random.Random(12)
last = 0
for i in range(400):
    n = rng.choice([1, 7, 100, 1000, 4096, 65536, 200000])
    if rng.random() < 0.3:
        pos = os.lseek(fd, 0, os.SEEK_CUR)
        got = os.read(fd, n)
    else:
        pos = rng.choice([rng.randrange(len(want)), max(0, last + rng.randrange(-300, 300))])
        got = os.pread(fd, n, pos)
    expected = want[pos:pos + n]
    assert got == expected, "read %d of %d at %d: got %d bytes" % (i, n, pos, len(got))
    last = pos
os.close(fd)
PY

# dd reads blocks at an offset.
expect_eq "$(dd if="$in" bs=1000 skip=777 count=3 2>/dev/null | md5sum)" \
    "$(dd if="$MNT/t/log" bs=1000 skip=777 count=3 2>/dev/null | md5sum)" "dd skip=777"

umount_kpfs
