"""Two kafka-python consumers in one consumer group, for tests/shell/t_groups_view.sh.

Usage: group_view_client.py BOOTSTRAP GROUP TOPIC...

Starts two KafkaConsumers (client ids view-1 and view-2, the roundrobin assignor, so each
gets one of two one-partition topics) in GROUP, subscribed to the TOPICs, and polls both
until the group is stable with every partition assigned. Then it takes commands from
stdin, one a line, and answers each with lines ending in "ok":

  consume   polls both until each has read its partitions to their end, commits, and
            prints what the clients report: per consumer "member MEMBER_ID CLIENT_ID
            GENERATION PROTOCOL TOPIC(0)...", then per partition "committed TOPIC
            PARTITION OFFSET" as OffsetFetch answers it.
  close     closes both (LeaveGroup).

Every wait is bounded; a timeout ends the script with an error.
"""

import sys
import time

from kafka import KafkaConsumer
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

TIMEOUT_S = 30


def consumers_of(bootstrap, group, topics):
    return [
        KafkaConsumer(
            *topics,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=f"view-{i}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
            request_timeout_ms=10_000,
        )
        for i in (1, 2)
    ]


def poll_until(consumers, done, what):
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        for c in consumers:
            c.poll(timeout_ms=100)


def stable(consumers, partitions):
    generations = [c._coordinator.generation_if_stable() for c in consumers]
    if any(g is None for g in generations):
        return False
    if len({g.generation_id for g in generations}) != 1:
        return False
    assigned = [tp for c in consumers for tp in c.assignment()]
    return all(c.assignment() for c in consumers) and len(assigned) == partitions


def caught_up(consumers):
    for c in consumers:
        tps = list(c.assignment())
        ends = c.end_offsets(tps)
        if any(c.position(tp) < ends[tp] for tp in tps):
            return False
    return True


def report(consumers):
    for c in consumers:
        g = c._coordinator.generation_if_stable()
        assigned = " ".join(sorted(f"{tp.topic}({tp.partition})" for tp in c.assignment()))
        print(f"member {g.member_id} {c.config['client_id']} {g.generation_id} {g.protocol} {assigned}")
    for c in consumers:
        for tp in sorted(c.assignment()):
            print(f"committed {tp.topic} {tp.partition} {c.committed(tp)}")


def main():
    bootstrap, group, topics = sys.argv[1], sys.argv[2], sys.argv[3:]
    consumers = consumers_of(bootstrap, group, topics)
    poll_until(consumers, lambda: stable(consumers, len(topics)), "a stable group")
    print("ok", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "consume":
            poll_until(consumers, lambda: caught_up(consumers), "the log ends")
            for c in consumers:
                c.commit()
            report(consumers)
        elif command == "close":
            for c in consumers:
                c.close()
        else:
            sys.exit(f"unknown command {command!r}")
        print("ok", flush=True)


if __name__ == "__main__":
    main()
