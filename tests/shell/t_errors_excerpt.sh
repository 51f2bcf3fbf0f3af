# .kpfs/errors keeps an excerpt of a refused value with its length, not the value: one
# bad 100 KB line or config value makes a line of a few hundred bytes.
source "$(dirname "$0")/lib.sh"

mount_kpfs
mkdir "$MNT/t"
echo "parse.key=true" > "$MNT/t/config"
expect_errno "Invalid argument" "{ head -c 100000 /dev/zero | tr '\0' x; echo; } >> '$MNT/t/log'"
expect_errno "Invalid argument" \
    "python3 -c 'import sys; sys.stdout.write(\"segment.ms=\" + \"9\" * 100000 + \"\\n\")' >> '$MNT/t/config'"
size=$(stat -c %s "$MNT/.kpfs/errors")
[ "$size" -lt 2000 ] || fail ".kpfs/errors is $size bytes after two refused 100 KB values"
xs=$(head -c 200 /dev/zero | tr '\0' x)
nines=$(head -c 200 /dev/zero | tr '\0' 9)
errors=$(cat "$MNT/.kpfs/errors")
expect_contains "$errors" "t/log: No key separator found on line number 1: '$xs...' (100000 bytes)" ".kpfs/errors"
expect_contains "$errors" "t/config: Invalid value $nines... (100000 bytes) for configuration segment.ms" ".kpfs/errors"
[ "$(stat -c %s "$MNT/t/events")" -lt 2000 ] || fail "events keeps the whole refused line"
umount_kpfs
