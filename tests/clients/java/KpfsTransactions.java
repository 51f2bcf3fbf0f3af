// Kafka's Java client (kafka-clients 4.3.1) using transactions against kpfs, one mode per
// run (tests/shell/t_kafka_transactions.sh drives them, killing processes in between):
//   basic BOOTSTRAP DATA_DIR      commit, abort and commit again; read_committed and
//                                 read_uncommitted consumers; an open transaction holds
//                                 read_committed readers back until its commit
//   seed BOOTSTRAP TOPIC N        N plain records "in-0".."in-N-1" into TOPIC
//   transform BOOTSTRAP IN OUT    consume-transform-produce with sendOffsetsToTransaction
//                                 (transactional.id "ctp", group "ctp"), one record per
//                                 transaction, slowly, until IN is read to its end
//   verify BOOTSTRAP IN OUT N     every input record's output is in OUT exactly once
//                                 (read_committed), and the group committed N
// Each check prints "ok: ..." or throws; the exit status says which.

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KpfsTransactions {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final Duration DEADLINE = Duration.ofSeconds(60);

    private final String bootstrap;

    private KpfsTransactions(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        KpfsTransactions t = new KpfsTransactions(args[1]);
        switch (args[0]) {
            case "basic" -> t.basic(Path.of(args[2]));
            case "seed" -> t.seed(args[2], Integer.parseInt(args[3]));
            case "transform" -> t.transform(args[2], args[3]);
            case "verify" -> t.verify(args[2], args[3], Integer.parseInt(args[4]));
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
        System.out.println("ok: " + what);
    }

    private KafkaProducer<String, String> producer(String transactionalId) {
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (transactionalId != null) {
            config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        }
        return new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
    }

    private KafkaConsumer<String, String> consumer(String isolation, String group) {
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        if (group != null) {
            config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer());
    }

    /** The values of partition 0 of `topic` up to its end offset (the LSO when read_committed). */
    private List<String> values(String topic, String isolation) {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = consumer(isolation, null)) {
            c.assign(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            c.seekToBeginning(List.of(tp));
            List<String> out = new ArrayList<>();
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (c.position(tp) < end) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError(topic + ": position " + c.position(tp) + " short of " + end);
                }
                c.poll(POLL).forEach(r -> out.add(r.value()));
            }
            return out;
        }
    }

    private static List<String> range(String prefix, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(prefix + i);
        }
        return out;
    }

    private void basic(Path dataDir) throws Exception {
        String topic = "txn-basic";
        try (KafkaProducer<String, String> p = producer("java-txn")) {
            p.initTransactions();
            p.beginTransaction();
            range("c1-", 10).forEach(v -> p.send(new ProducerRecord<>(topic, 0, null, v)));
            p.commitTransaction();
            p.beginTransaction();
            range("a-", 5).forEach(v -> p.send(new ProducerRecord<>(topic, 0, null, v)));
            p.flush();
            p.abortTransaction();
            p.beginTransaction();
            range("c2-", 3).forEach(v -> p.send(new ProducerRecord<>(topic, 0, null, v)));
            p.commitTransaction();
        }
        List<String> committed = new ArrayList<>(range("c1-", 10));
        committed.addAll(range("c2-", 3));
        check(values(topic, "read_committed").equals(committed),
                "read_committed sees the 13 committed records, not the 5 aborted: " + values(topic, "read_committed"));
        List<String> all = new ArrayList<>(range("c1-", 10));
        all.addAll(range("a-", 5));
        all.addAll(range("c2-", 3));
        check(values(topic, "read_uncommitted").equals(all), "read_uncommitted sees all 18");
        try (Stream<Path> files = Files.list(dataDir.resolve(topic + "-0"))) {
            List<Path> indexes = files.filter(f -> f.toString().endsWith(".txnindex")).toList();
            check(indexes.size() == 1 && Files.size(indexes.get(0)) == 34,
                    "one .txnindex of one 34-byte entry: " + indexes);
        }

        // An open transaction holds read_committed readers at its first offset.
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> p = producer("java-txn-open");
                KafkaConsumer<String, String> c = consumer("read_committed", null)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, null, "late-0"));
            p.send(new ProducerRecord<>(topic, 0, null, "late-1"));
            p.flush();
            c.assign(List.of(tp));
            long stable = c.endOffsets(List.of(tp)).get(tp);
            check(stable == 21, "read_committed end offset is the open transaction's first offset, 21: " + stable);
            c.seek(tp, stable);
            check(c.poll(Duration.ofSeconds(1)).isEmpty(), "nothing past it while it is open");
            p.commitTransaction();
            List<String> late = new ArrayList<>();
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (late.size() < 2 && System.nanoTime() < deadline) {
                c.poll(POLL).forEach(r -> late.add(r.value()));
            }
            check(late.equals(List.of("late-0", "late-1")), "its records arrive with the commit: " + late);
        }
    }

    private void seed(String topic, int n) throws Exception {
        try (KafkaProducer<String, String> p = producer(null)) {
            for (String v : range("in-", n)) {
                p.send(new ProducerRecord<>(topic, 0, null, v)).get();
            }
        }
        System.out.println("ok: seeded " + n);
    }

    private void transform(String in, String out) throws Exception {
        TopicPartition tp = new TopicPartition(in, 0);
        try (KafkaProducer<String, String> p = producer("ctp");
                KafkaConsumer<String, String> c = consumer("read_committed", "ctp")) {
            p.initTransactions();
            c.subscribe(List.of(in));
            long end = -1;
            long deadline = System.nanoTime() + DEADLINE.toNanos() * 3;
            while (System.nanoTime() < deadline) {
                ConsumerRecords<String, String> records = c.poll(POLL);
                if (end < 0 && !c.assignment().isEmpty()) {
                    end = c.endOffsets(List.of(tp)).get(tp);
                }
                for (ConsumerRecord<String, String> r : records) {
                    p.beginTransaction();
                    p.send(new ProducerRecord<>(out, 0, null, "out-" + r.value()));
                    p.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(r.offset() + 1)),
                            c.groupMetadata());
                    p.commitTransaction();
                    System.out.println("committed " + r.offset());
                    Thread.sleep(20);
                }
                if (end >= 0 && c.position(tp) >= end) {
                    System.out.println("ok: transformed up to " + end);
                    return;
                }
            }
            throw new AssertionError("did not reach the end of " + in);
        }
    }

    private void verify(String in, String out, int n) throws Exception {
        List<String> outputs = values(out, "read_committed");
        Map<String, Integer> counts = new TreeMap<>();
        outputs.forEach(v -> counts.merge(v, 1, Integer::sum));
        List<String> expected = range("out-in-", n);
        check(counts.keySet().equals(new java.util.TreeSet<>(expected)),
                "every input record has an output: " + counts.size() + " of " + n);
        check(counts.values().stream().allMatch(c -> c == 1),
                "each exactly once (" + outputs.size() + " outputs)");
        TopicPartition tp = new TopicPartition(in, 0);
        try (KafkaConsumer<String, String> c = consumer("read_committed", "ctp")) {
            OffsetAndMetadata committed = c.committed(java.util.Set.of(tp)).get(tp);
            check(committed != null && committed.offset() == n, "the group committed " + n + ": " + committed);
        }
    }
}
