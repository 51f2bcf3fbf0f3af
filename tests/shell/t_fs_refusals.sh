# Every operation kpfs does not support fails with a definite errno and leaves a reason
# in .kpfs/errors: creating files, links, renames, removals, truncation with >, chmod,
# touch, directories inside a topic, writes to read-only files, invalid topic names.
source "$(dirname "$0")/lib.sh"

mount_kpfs
mkdir "$MNT/t"
echo "a:1" >> "$MNT/t/log"

expect_errno "Operation not permitted" "touch '$MNT/newfile'"
expect_rejection "newfile"

expect_errno "Operation not permitted" "ln -s log '$MNT/t/link'"
expect_rejection "t/link"

expect_errno "Operation not permitted" "mv '$MNT/t/log' '$MNT/t/log2'"
expect_rejection "t/log"

expect_errno "Operation not permitted" "rm '$MNT/t/log'"

expect_errno "Operation not permitted" "echo 'b:2' > '$MNT/t/log'"
expect_contains "$(cat "$MNT/.kpfs/errors")" "use >>" ".kpfs/errors after > log"

expect_errno "Operation not permitted" "chmod 600 '$MNT/t/log'"
expect_contains "$(cat "$MNT/.kpfs/errors")" "chmod" ".kpfs/errors after chmod"

expect_errno "Operation not permitted" "touch '$MNT/t/log'"
expect_contains "$(cat "$MNT/.kpfs/errors")" "touch" ".kpfs/errors after touch"

expect_errno "Operation not permitted" "mkdir '$MNT/t/sub'"
expect_rejection "t/sub"

expect_errno "Permission denied" "echo x >> '$MNT/t/status'"
expect_rejection "t/status"

expect_errno "Invalid argument" "mkdir '$MNT/bad name'"
expect_rejection "bad name"

expect_errno "Operation not permitted" "rmdir '$MNT/.kpfs'"
expect_errno "Operation not permitted" "mkdir '$MNT/t/segments/x'"

# Nothing above changed the log.
expect_eq "a:1" "$(cat "$MNT/t/log")" "log after refused operations"
umount_kpfs
