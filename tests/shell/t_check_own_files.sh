# kpfs check of a data directory that kpfs closed cleanly reports nothing: every file in
# it is one kpfs wrote, its own log kpfs.log included.
source "$(dirname "$0")/lib.sh"

mount_kpfs
mkdir "$MNT/t"
echo a >> "$MNT/t/log"
umount_kpfs
[ -s "$DATA/kpfs.log" ] || fail "the daemon wrote no kpfs.log"
out=$("$KPFS" check "$DATA" 2>&1) || fail "kpfs check failed: $out"
expect_eq "checked 1 topics, 1 segments, 1 records: 0 problems" "$out" "kpfs check output"
