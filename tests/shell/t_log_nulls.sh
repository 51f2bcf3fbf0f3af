# A line of `log` is fixed when its record is appended: a record appended before
# parse.key was set reads as it was written, and a change of null.marker applies to the
# records after it. Under parse.key=true a null key reads as null.marker, never like an
# empty key; `log`'s size is what cat reads, at every position.
source "$(dirname "$0")/lib.sh"

mount_kpfs
mkdir "$MNT/t"
echo "keyless" >> "$MNT/t/log"
printf 'parse.key=true\nkey.separator=:\n' > "$MNT/t/config"
echo ":empty key" >> "$MNT/t/log"
expect_eq $'keyless\n:empty key' "$(cat "$MNT/t/log")" "log after parse.key=true"
echo "null.marker=NIL" >> "$MNT/t/config"
echo "NIL:null key" >> "$MNT/t/log"
echo "k:NIL" >> "$MNT/t/log"
expect_eq $'keyless\n:empty key\nNIL:null key\nk:NIL' "$(cat "$MNT/t/log")" "log with null.marker=NIL"
echo "-null.marker" >> "$MNT/t/config"
echo "k:NIL" >> "$MNT/t/log"
want=$'keyless\n:empty key\nNIL:null key\nk:NIL\nk:NIL\n'
expect_eq "${want}end" "$(cat "$MNT/t/log"; echo end)" "log after removing null.marker"
expect_eq "${#want}" "$(stat -c %s "$MNT/t/log")" "size of log"
expect_eq $'k:NIL\nk:NIL' "$(tail -c 12 "$MNT/t/log")" "tail -c of log"
# The records as parsed: a null key, a null value, then the text NIL once no marker is set.
dump=$("$KPFS" dump-log --print-data-log "$MNT/t/segments/00000000000000000000.log")
expect_eq $'-1 8\n1 -1\n1 3' "$(sed -n 's/.* keySize: \(-*[0-9]*\) valueSize: \(-*[0-9]*\) .*/\1 \2/p' <<<"$dump" | tail -n 3)" \
    "keySize and valueSize of the last three records"
umount_kpfs
