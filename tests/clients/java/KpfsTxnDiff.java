// One deterministic transactional workload, run by tests/shell/t_kafka_txn_diff.sh against
// a real Kafka 4.3.1 broker and against kpfs at the same time, each side its own run:
//   KpfsTxnDiff BOOTSTRAP SYNC_DIR T0
// Committed and aborted transactions of two transactional ids over the two partitions of
// topic txd, between plain (acks=1, not idempotent) and idempotent writes; an abort whose
// batches span a segment roll; two transactions left open at checkpoints; a transaction
// aborted by its timeout; consumed offsets of group txd-group sent in committed, aborted
// and open transactions (sendOffsetsToTransaction). Everything that can be chosen is:
// partitions, keys, values,
// record timestamps (T0 + n), the order in which producers get their ids, and the next
// write waits until the coordinator completed the transaction before it (Kafka writes
// markers after answering EndTxn), so that both logs hold the same batches at the same
// offsets. At "checkpoint NAME" it waits for SYNC_DIR/NAME.go, while the test measures.
// It prints what a client observes (the timed-out producer's error, what read_committed
// and read_uncommitted consumers read, the group's committed offsets); the test compares
// that too.

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KpfsTxnDiff {
    static final String TOPIC = "txd";
    static final Duration DEADLINE = Duration.ofSeconds(60);

    private final String bootstrap;
    private final Path sync;
    private final long t0;
    private final Admin admin;
    private int n;
    /** Group txd-group as a consumer that never joined it names it (generation -1). */
    private ConsumerGroupMetadata group;

    private KpfsTxnDiff(String bootstrap, Path sync, long t0) {
        this.bootstrap = bootstrap;
        this.sync = sync;
        this.t0 = t0;
        this.admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
    }

    public static void main(String[] args) throws Exception {
        System.err.println("start at " + System.currentTimeMillis());
        KpfsTxnDiff w = new KpfsTxnDiff(args[0], Path.of(args[1]), Long.parseLong(args[2]));
        try {
            w.run();
        } finally {
            w.admin.close();
        }
    }

    private KafkaProducer<String, String> producer(Map<String, Object> extra) {
        Map<String, Object> config = new HashMap<>(extra);
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        // One send, one batch: the batches (and so the offsets and the segment roll) are
        // the workload's, not the timing's.
        config.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        return new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
    }

    private KafkaProducer<String, String> transactional(String id, int timeoutMs) {
        KafkaProducer<String, String> p = producer(Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, id,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, timeoutMs));
        p.initTransactions();
        return p;
    }

    /** Sends one record to PARTITION and waits for its answer (one batch each). */
    private void send(KafkaProducer<String, String> p, int partition, String what) throws Exception {
        int i = n++;
        p.send(new ProducerRecord<>(TOPIC, partition, t0 + i, "k" + i, what + "-" + i)).get();
    }

    /** Offset OFFSET of PARTITION, for GROUP, in P's transaction. */
    private void sendOffset(KafkaProducer<String, String> p, int partition, long offset) {
        p.sendOffsetsToTransaction(
                Map.of(new TopicPartition(TOPIC, partition), new OffsetAndMetadata(offset, "m" + offset)), group);
    }

    private void waitState(String id, TransactionState want) throws Exception {
        long deadline = System.nanoTime() + DEADLINE.toNanos();
        TransactionState state = null;
        while (System.nanoTime() < deadline) {
            state = admin.describeTransactions(List.of(id)).description(id).get().state();
            if (state == want) {
                return;
            }
            Thread.sleep(50);
        }
        throw new AssertionError(id + " is " + state + ", not " + want + ", after " + DEADLINE);
    }

    private void checkpoint(String name) throws Exception {
        // When, on standard error (not compared): where the test's time goes.
        System.err.println("checkpoint " + name + " at " + System.currentTimeMillis());
        System.out.println("checkpoint " + name);
        System.out.flush();
        Path go = sync.resolve(name + ".go");
        long deadline = System.nanoTime() + DEADLINE.toNanos() * 2;
        while (!Files.exists(go)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no " + go + " in time");
            }
            Thread.sleep(20);
        }
    }

    private void run() throws Exception {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, ConsumerConfig.GROUP_ID_CONFIG, "txd-group"),
                new StringDeserializer(), new StringDeserializer())) {
            group = c.groupMetadata();
        }
        admin.createTopics(List.of(new NewTopic(TOPIC, 2, (short) 1)
                .configs(Map.of("internal.segment.bytes", System.getProperty("segmentBytes", "1073741824")))))
                .all().get();
        // Producer ids are handed out in the order producers ask: the idempotent producer
        // first (its first send), then txd-a, txd-b and txd-timeout at initTransactions.
        try (KafkaProducer<String, String> plain = producer(Map.of(
                        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false, ProducerConfig.ACKS_CONFIG, "1"));
                KafkaProducer<String, String> idem = producer(Map.of())) {
            send(plain, 0, "plain");
            send(plain, 0, "plain");
            send(plain, 1, "plain");
            send(idem, 0, "idem");
            send(idem, 1, "idem");
            try (KafkaProducer<String, String> a = transactional("txd-a", 60000)) {
                // T1, committed over both partitions.
                a.beginTransaction();
                send(a, 0, "t1");
                send(a, 0, "t1");
                send(a, 1, "t1");
                sendOffset(a, 0, 2);
                a.commitTransaction();
                waitState("txd-a", TransactionState.COMPLETE_COMMIT);
                send(idem, 0, "idem");
                try (KafkaProducer<String, String> b = transactional("txd-b", 60000)) {
                    // T2, aborted over both partitions.
                    b.beginTransaction();
                    send(b, 1, "t2");
                    send(b, 0, "t2");
                    send(b, 1, "t2");
                    sendOffset(b, 1, 99);
                    b.abortTransaction();
                    waitState("txd-b", TransactionState.COMPLETE_ABORT);
                    // T3, aborted, on partition 0 across a segment roll.
                    a.beginTransaction();
                    for (int i = 0; i < 6; i++) {
                        send(a, 0, "t3");
                    }
                    send(plain, 0, "plain-inside-t3");
                    send(a, 0, "t3");
                    a.abortTransaction();
                    waitState("txd-a", TransactionState.COMPLETE_ABORT);
                    send(plain, 1, "plain");
                    // T4 (txd-b) and T5 (txd-a) open, T4 first on partition 1, with an
                    // idempotent write after both.
                    b.beginTransaction();
                    send(b, 0, "t4");
                    send(b, 1, "t4");
                    a.beginTransaction();
                    send(a, 1, "t5");
                    send(b, 0, "t4");
                    sendOffset(b, 1, 3);
                    send(idem, 1, "idem");
                    checkpoint("open");
                    b.commitTransaction();
                    waitState("txd-b", TransactionState.COMPLETE_COMMIT);
                    checkpoint("one-open");
                    send(a, 1, "t5");
                    a.abortTransaction();
                    waitState("txd-a", TransactionState.COMPLETE_ABORT);
                }
            }
            // A transaction left to its timeout (3 s): the coordinator aborts it and
            // bumps the epoch, so the producer is fenced: its next write to a partition
            // of the transaction, and its commit, are refused.
            System.err.println("timeout from " + System.currentTimeMillis());
            try (KafkaProducer<String, String> t = transactional("txd-timeout", 3000)) {
                t.beginTransaction();
                int i = n;
                n += 3;
                // Both partitions, one after the other (each its own AddPartitionsToTxn, or
                // at transaction version 2 its own Produce: two transitions on both
                // brokers, where two at once would race the producer's sender), well
                // inside the timeout.
                t.send(new ProducerRecord<>(TOPIC, 1, t0 + i, "k" + i, "timeout-" + i));
                t.flush();
                t.send(new ProducerRecord<>(TOPIC, 0, t0 + i + 1, "k" + (i + 1), "timeout-" + (i + 1)));
                t.flush();
                waitState("txd-timeout", TransactionState.COMPLETE_ABORT);
                try {
                    t.send(new ProducerRecord<>(TOPIC, 1, t0 + i + 2, "k" + (i + 2), "timeout-" + (i + 2))).get();
                    System.out.println("txd-timeout: a write after the timeout succeeded");
                } catch (ExecutionException e) {
                    System.out.println("txd-timeout: a write after the timeout: " + e.getCause().getClass().getName());
                }
                try {
                    t.commitTransaction();
                    System.out.println("txd-timeout: commit after the timeout succeeded");
                } catch (Exception e) {
                    System.out.println("txd-timeout: commit after the timeout: " + e.getClass().getName());
                }
            }
            send(plain, 0, "plain-last");
            send(idem, 1, "idem-last");
        }
        System.out.println("txd-group offsets: " + new TreeMap<>(
                admin.listConsumerGroupOffsets(group.groupId()).partitionsToOffsetAndMetadata().get()
                        .entrySet().stream().collect(java.util.stream.Collectors.toMap(
                                e -> e.getKey().toString(), e -> e.getValue().toString()))));
        System.err.println("consumers from " + System.currentTimeMillis());
        consume("read_committed");
        consume("read_uncommitted");
    }

    /** What a consumer of ISOLATION reads of each partition, up to its end offset. */
    private void consume(String isolation) throws Exception {
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
            for (int partition = 0; partition < 2; partition++) {
                TopicPartition tp = new TopicPartition(TOPIC, partition);
                c.assign(List.of(tp));
                long end = c.endOffsets(List.of(tp)).get(tp);
                c.seekToBeginning(List.of(tp));
                List<String> got = new ArrayList<>();
                long deadline = System.nanoTime() + DEADLINE.toNanos();
                while (c.position(tp) < end) {
                    if (System.nanoTime() > deadline) {
                        throw new AssertionError(tp + ": position " + c.position(tp) + " short of " + end);
                    }
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                        got.add(r.offset() + ":" + r.value());
                    }
                }
                System.out.println(isolation + " " + tp + " end " + end + ": " + String.join(" ", got));
            }
        }
    }
}
