"""Two kafka-python consumers in one consumer group, for tests/shell/t_groups_view.sh.

Usage: group_view_client.py BOOTSTRAP GROUP TOPIC...

Starts two KafkaConsumers (client ids view-1 and view-2, the roundrobin assignor, so each
gets one of two one-partition topics) in GROUP, subscribed to the TOPICs, each driven by
a thread of its own as two applications would be, and waits until the group is stable
with every partition assigned. Then it takes commands from stdin, one a line, and
answers each with lines ending in "ok":

  consume   both read their partitions to their end and commit; prints what the clients
            report: per consumer "member MEMBER_ID CLIENT_ID GENERATION PROTOCOL
            TOPIC(0)...", then per partition "committed TOPIC PARTITION OFFSET" as
            OffsetFetch answers it.
  close     closes both (LeaveGroup) and ends the script.

Every wait is bounded; a timeout ends the script with an error.
"""

import queue
import sys
import threading
import time

from kafka import KafkaConsumer
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

TIMEOUT_S = 60


class Member(threading.Thread):
    """One consumer, used only by its own thread: kafka-python 3.0 drops a JoinGroup
    answer that arrives between two polls and joins again, which makes the group
    rebalance, so a consumer must be polled without long pauses while it joins (one
    thread polling two consumers in turn made that happen every few runs)."""

    def __init__(self, consumer):
        super().__init__(daemon=True)
        self.consumer = consumer
        self.commands = queue.Queue()
        self.answers = queue.Queue()

    def run(self):
        for command in iter(self.commands.get, None):
            try:
                self.answers.put((True, command(self.consumer)))
            except Exception as e:  # the main thread reports it
                self.answers.put((False, e))


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


def poll_until(consumer, done, what):
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{consumer.config['client_id']} timed out waiting for {what}")
        consumer.poll(timeout_ms=1000)


def joined(consumer):
    poll_until(
        consumer,
        lambda: consumer.assignment() and consumer._coordinator.generation_if_stable(),
        "its partitions",
    )
    return consumer._coordinator.generation_if_stable().generation_id


def caught_up(consumer):
    tps = list(consumer.assignment())
    ends = consumer.end_offsets(tps)
    return all(consumer.position(tp) >= ends[tp] for tp in tps)


def consume(consumer):
    poll_until(consumer, lambda: caught_up(consumer), "the log ends")
    consumer.commit()
    g = consumer._coordinator.generation_if_stable()
    assigned = sorted(f"{tp.topic}({tp.partition})" for tp in consumer.assignment())
    member = f"member {g.member_id} {consumer.config['client_id']} {g.generation_id} {g.protocol} {' '.join(assigned)}"
    committed = [
        f"committed {tp.topic} {tp.partition} {consumer.committed(tp)}"
        for tp in sorted(consumer.assignment())
    ]
    return member, committed


def on_both(members, command):
    for m in members:
        m.commands.put(command)
    answers = []
    for m in members:
        try:
            ok, answer = m.answers.get(timeout=2 * TIMEOUT_S)
        except queue.Empty:
            sys.exit(f"{m.consumer.config['client_id']} did not answer")
        if not ok:
            sys.exit(f"{m.consumer.config['client_id']}: {answer}")
        answers.append(answer)
    return answers


def main():
    bootstrap, group, topics = sys.argv[1], sys.argv[2], sys.argv[3:]
    members = [Member(c) for c in consumers_of(bootstrap, group, topics)]
    for m in members:
        m.start()
    # One generation for both, and every partition assigned (a member may have joined
    # a generation the other then made it leave).
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        generations = on_both(members, joined)
        assigned = sum(len(m.consumer.assignment()) for m in members)
        if len(set(generations)) == 1 and assigned == len(topics):
            break
        if time.monotonic() > deadline:
            sys.exit(f"no stable group: generations {generations}, {assigned} partitions assigned")
    print("ok", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "consume":
            reports = on_both(members, consume)
            for member, _ in reports:
                print(member)
            for _, committed in reports:
                print("\n".join(committed))
        elif command == "close":
            on_both(members, KafkaConsumer.close)
            print("ok", flush=True)
            return
        else:
            sys.exit(f"unknown command {command!r}")
        print("ok", flush=True)


if __name__ == "__main__":
    main()
