# Topic names follow Kafka's rules: up to 249 legal characters, ASCII alphanumerics,
# '.', '_' and '-', not colliding with another topic's in metric names; others are refused
# with Kafka's reason. mkdir of an existing topic is EEXIST; rmdir deletes the topic and
# its data, and a new topic of that name starts empty.
source "$(dirname "$0")/lib.sh"

mount_kpfs

long249=$(head -c 249 /dev/zero | tr '\0' 'a')
long250=$(head -c 250 /dev/zero | tr '\0' 'b')

mkdir "$MNT/$long249" || fail "a 249-character topic name was refused"
echo x >> "$MNT/$long249/log"
expect_eq x "$(cat "$MNT/$long249/log")" "log of the 249-character topic"
[ -d "$DATA/$long249-0" ] || fail "no $DATA/<249 chars>-0"

expect_errno "Invalid argument" "mkdir '$MNT/$long250'"
expect_contains "$(tail -n 1 "$MNT/.kpfs/errors")" "Topic name is invalid: the length of '$long250' is longer than the max allowed length 249" "error for 250 characters"

for name in 'a b' 'ü' 'x,y'; do
    expect_errno "Invalid argument" "mkdir '$MNT/$name'"
    expect_contains "$(tail -n 1 "$MNT/.kpfs/errors")" \
        "Topic name is invalid: '$name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'" \
        "error for '$name'"
done
[ ! -e "$MNT/a b" ] && [ ! -e "$MNT/ü" ] || fail "a refused topic exists anyway"

# Names that differ only in '.' versus '_' collide in Kafka's metric names: Kafka warns
# about a name with either and refuses the second of such a pair.
expect_errno "Invalid argument" "mkdir '$MNT/my.topic' '$MNT/my_topic'"
[ -d "$MNT/my.topic" ] || fail "my.topic was not created"
[ ! -e "$MNT/my_topic" ] && [ ! -e "$DATA/my_topic-0" ] || fail "my_topic was created"
errors=$(tail -n 2 "$MNT/.kpfs/errors")
expect_contains "$errors" "my.topic: warning: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both." \
    "warning for my.topic"
expect_contains "$errors" "my_topic: Topic 'my_topic' collides with existing topic: my.topic" \
    "refusal of my_topic"

# .kpfs is the control directory: the kernel sees it exists and answers EEXIST; in no
# case does it become a topic.
status=0
err=$(mkdir "$MNT/.kpfs" 2>&1) || status=$?
[ "$status" -ne 0 ] || fail "mkdir .kpfs succeeded"
case $err in *"File exists"* | *"Invalid argument"* | *"Operation not permitted"*) ;; *) fail "mkdir .kpfs: $err" ;; esac
[ ! -e "$DATA/.kpfs-0" ] || fail "mkdir .kpfs made a partition directory"

# mkdir of an existing topic: EEXIST, the topic is untouched.
mkdir "$MNT/orders"
echo "o1" >> "$MNT/orders/log"
expect_errno "File exists" "mkdir '$MNT/orders'"
expect_eq o1 "$(cat "$MNT/orders/log")" "orders/log after a second mkdir"

# rmdir deletes the topic and its data; a new topic of the same name is empty.
echo "o2" >> "$MNT/orders/log"
rmdir "$MNT/orders" || fail "rmdir of a topic failed"
[ ! -e "$MNT/orders" ] || fail "orders still listed after rmdir"
gone() { ! ls -a "$DATA" | grep -q '^orders-0'; }
wait_until 10 gone || fail "data dir still has $(ls -a "$DATA" | grep '^orders-0')"
mkdir "$MNT/orders"
expect_eq "" "$(cat "$MNT/orders/log")" "log of the recreated topic"
expect_eq 0 "$(stat -c %s "$MNT/orders/log")" "st_size of the recreated log"
expect_eq "log_end_offset: 0" "$(grep '^log_end_offset:' "$MNT/orders/status")" "status of the recreated topic"
echo "n1" >> "$MNT/orders/log"
expect_eq n1 "$(cat "$MNT/orders/log")" "recreated topic after an append"

# The longest names delete too (NAME-0.<ms>-delete would pass 255 bytes; Kafka cuts the
# topic part), and for good: neither mkdir of the same name nor a remount brings the data
# back.
rmdir "$MNT/$long249" || fail "rmdir of the 249-character topic failed"
[ ! -e "$MNT/$long249" ] || fail "the 249-character topic is still listed after rmdir"
long_gone() { ! ls -a "$DATA" | grep -q '^aaaa'; }
wait_until 10 long_gone || fail "data dir still has $(ls -a "$DATA" | grep '^aaaa')"
mkdir "$MNT/$long249"
expect_eq "" "$(cat "$MNT/$long249/log")" "log of the recreated 249-character topic"
rmdir "$MNT/$long249"

# Errors name a topic named like a partition as it is, not cut at its last "-0".
mkdir "$MNT/x-0"
exec {writer}>>"$MNT/x-0/log"
rmdir "$MNT/x-0"
expect_errno "No such file or directory" "echo late >&$writer"
exec {writer}>&-
expect_contains "$(tail -n 1 "$MNT/.kpfs/errors")" \
    "This server does not host this topic-partition: x-0-0" "error for the deleted topic x-0"

# The deletions hold across a remount.
umount_kpfs
remount_kpfs
expect_eq n1 "$(cat "$MNT/orders/log")" "recreated topic after remount"
[ ! -e "$MNT/$long249" ] || fail "the deleted 249-character topic is back after remount"
umount_kpfs
