# With parse.key=true, a record without a key (written before parse.key was set) reads
# with its key as null.marker, or as `null` when there is none (Kafka's console
# consumer's null.literal), never like a record whose key is empty.
source "$(dirname "$0")/lib.sh"

mount_kpfs
mkdir "$MNT/t"
echo "keyless" >> "$MNT/t/log"
printf 'parse.key=true\nkey.separator=:\n' > "$MNT/t/config"
echo ":empty key" >> "$MNT/t/log"
expect_eq $'null:keyless\n:empty key' "$(cat "$MNT/t/log")" "log without a null.marker"
echo "null.marker=NIL" >> "$MNT/t/config"
echo "k:NIL" >> "$MNT/t/log"
expect_eq $'NIL:keyless\n:empty key\nk:NIL' "$(cat "$MNT/t/log")" "log with null.marker=NIL"
echo "-null.marker" >> "$MNT/t/config"
expect_eq $'null:keyless\n:empty key\nk:null' "$(cat "$MNT/t/log")" "log after removing null.marker"
umount_kpfs
