# Mount, create a topic, append with >>, read it back with cat, unmount, and check that
# a remount of the same data directory shows the same records (and the same st_size).
source "$(dirname "$0")/lib.sh"

mount_kpfs
expect_contains "$(ls -a "$MNT")" ".kpfs" "ls -a of the mount root"

mkdir "$MNT/orders"
for name in log config segments status; do
    [ -e "$MNT/orders/$name" ] || fail "orders/$name missing"
done

echo "k1:v1" >> "$MNT/orders/log"
echo "k2:v2" >> "$MNT/orders/log"
printf 'k3:v3\nk4:v4\n' >> "$MNT/orders/log"
expected=$'k1:v1\nk2:v2\nk3:v3\nk4:v4'
expect_eq "$expected" "$(cat "$MNT/orders/log")" "cat orders/log"
expect_eq "$(cat "$MNT/orders/log" | wc -c)" "$(stat -c %s "$MNT/orders/log")" "st_size vs bytes read"

# A last line without a newline is committed when the writer closes.
printf 'k5:v5' >> "$MNT/orders/log"
expected+=$'\nk5:v5'
expect_eq "$expected" "$(cat "$MNT/orders/log")" "cat after an unterminated write"

umount_kpfs
remount_kpfs
expect_eq "$expected" "$(cat "$MNT/orders/log")" "cat orders/log after remount"
expect_eq "$(cat "$MNT/orders/log" | wc -c)" "$(stat -c %s "$MNT/orders/log")" "st_size after remount"
umount_kpfs
