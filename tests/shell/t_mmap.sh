# Files of the mount are opened for direct I/O (reads always come from the engine); a
# kernel since 6.6 maps such files when the server allows it at init
# (FUSE_DIRECT_IO_ALLOW_MMAP), which kpfs does: python's mmap of `log` and of a segment
# file reads what cat reads.
source "$(dirname "$0")/lib.sh"

IFS=. read -r major minor _ <<<"$(uname -r)"
if [ "$major" -lt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -lt 6 ]; }; then
    echo "SKIP: kernel $(uname -r) predates FUSE_DIRECT_IO_ALLOW_MMAP (6.6): mmap fails with ENODEV there"
    exit 0
fi

mount_kpfs
mkdir "$MNT/t"
for i in $(seq 1 2000); do echo "record number $i"; done >>"$MNT/t/log"
segment=$MNT/t/segments/00000000000000000000.log

mapped() {
    python3 - "$1" <<'EOF'
import mmap, sys
with open(sys.argv[1], "rb") as f:
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        sys.stdout.buffer.write(m[:])
EOF
}

expect_eq "$(cat "$MNT/t/log" | sha256sum)" "$(mapped "$MNT/t/log" | sha256sum)" "mmap of log"
expect_eq "$(cat "$segment" | sha256sum)" "$(mapped "$segment" | sha256sum)" "mmap of a segment file"
# A new mapping sees an append (each mmap drops the pages cached before).
echo "one more" >>"$MNT/t/log"
expect_eq "$(cat "$MNT/t/log" | sha256sum)" "$(mapped "$MNT/t/log" | sha256sum)" "mmap of log after an append"
expect_eq "" "$(grep 'FUSE_DIRECT_IO_ALLOW_MMAP' "$MNT/.kpfs/errors" || true)" ".kpfs/errors on a kernel that maps"
# A shared writable mapping's pages would be written back at their offsets: refused, and
# nothing is appended.
before=$(cat "$MNT/t/log" | sha256sum)
out=$(python3 - "$MNT/t/log" <<'EOF'
import mmap, sys
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    m[0:6] = b"RECORD"
    try:
        m.flush()
        print("flushed")
    except OSError as e:
        print(e.strerror)
EOF
)
expect_eq "Operation not permitted" "$out" "msync of a written shared mapping of log"
expect_eq "$before" "$(cat "$MNT/t/log" | sha256sum)" "log after a write through a mapping"
expect_rejection "t/log"
expect_contains "$(cat "$MNT/.kpfs/errors")" "t/log: writes through a shared mapping (mmap) are not supported"
umount_kpfs
