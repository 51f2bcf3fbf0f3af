// Apache Kafka's Java client (kafka-clients 4.3.1) against a kpfs listener: the producer
// with its defaults and each codec, a consumer group of two, and the AdminClient calls
// kpfs serves. tests/shell/t_kafka_java.sh compiles it against target/kafka-4.3.1/libs and
// runs it:
//
//   java KpfsJavaClient BOOTSTRAP DATA_DIR MATRIX_TSV
//
// DATA_DIR is kpfs's data directory: the producer checks read the partition files kpfs
// wrote (producer id, epoch, sequences, codec of each batch) with Kafka's own record
// classes. Each scenario appends "SCENARIO<TAB>RESULT<TAB>NOTE" to MATRIX_TSV (the client
// matrix, tests/shell: pass, fail or unsupported) and the exit status is 1 if any failed.
// The broker must have auto.create.topics.enable=false: the unknown-topic check needs it.

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.function.IntSupplier;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.internal.CompressionType;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KpfsJavaClient {
    private static final Duration POLL = Duration.ofMillis(100);
    private static final Duration DEADLINE = Duration.ofSeconds(30);

    private final String bootstrap;
    private final Path dataDir;
    private final Path matrix;
    private final Admin admin;
    private boolean anyFailed;

    private KpfsJavaClient(String bootstrap, Path dataDir, Path matrix) {
        this.bootstrap = bootstrap;
        this.dataDir = dataDir;
        this.matrix = matrix;
        this.admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: java KpfsJavaClient BOOTSTRAP DATA_DIR MATRIX_TSV");
            System.exit(2);
        }
        KpfsJavaClient client = new KpfsJavaClient(args[0], Path.of(args[1]), Path.of(args[2]));
        try {
            client.runAll();
        } finally {
            client.admin.close();
        }
        System.exit(client.anyFailed ? 1 : 0);
    }

    /** A check failed: what was expected and what the client saw. */
    private static final class CheckFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        CheckFailed(String message) {
            super(message);
        }
    }

    /** What kpfs lacks for a scenario, found by the client's refusal. */
    private static final class Unsupported extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Unsupported(String reason) {
            super(reason);
        }
    }

    @FunctionalInterface
    private interface Scenario {
        String run() throws Exception;
    }

    private void scenario(String name, Scenario body) throws IOException {
        String result;
        String note;
        long start = System.nanoTime();
        try {
            note = body.run();
            result = "pass";
        } catch (Unsupported e) {
            result = "unsupported";
            note = e.getMessage();
        } catch (Throwable e) {
            result = "fail";
            note = e.toString();
            anyFailed = true;
            e.printStackTrace();
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        System.out.printf("%-34s %-11s %5d ms  %s%n", name, result, ms, note);
        String row = name + "\t" + result + "\t" + note.replaceAll("[\t\n]", " ") + "\n";
        Files.writeString(matrix, row, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    private static void check(boolean condition, Supplier<String> what) {
        if (!condition) {
            throw new CheckFailed(what.get());
        }
    }

    private static void expectEq(Object expected, Object got, String what) {
        check(expected.equals(got), () -> what + ": expected " + expected + ", got " + got);
    }

    /** The cause an ExecutionException wraps, checked to be of the class expected. */
    private static <T extends Throwable> T failure(Future<?> future, Class<T> expected, String what)
            throws InterruptedException {
        try {
            future.get();
        } catch (ExecutionException e) {
            check(expected.isInstance(e.getCause()), () -> what + ": expected " + expected.getSimpleName()
                    + ", got " + e.getCause());
            return expected.cast(e.getCause());
        }
        throw new CheckFailed(what + ": succeeded; expected " + expected.getSimpleName());
    }

    // ---- Clients ----

    private KafkaProducer<byte[], byte[]> producer(Map<String, Object> overrides) {
        Map<String, Object> config = new HashMap<>(overrides);
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    }

    private KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> overrides) {
        Map<String, Object> config = new HashMap<>(overrides);
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private void createTopic(String name, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(name, 1, (short) 1).configs(configs))).all().get();
    }

    private static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    private static String string(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    /** Record i of a test workload: every 10th key null, every 7th value null, a header each. */
    private static ProducerRecord<byte[], byte[]> workloadRecord(String topic, int i, Long timestamp) {
        String key = i % 10 == 3 ? null : "key-" + i;
        String value = i % 7 == 5 ? null : "value " + i + " " + "abcdefgh".repeat(i % 13);
        List<Header> headers = List.of(new RecordHeader("n", bytes(Integer.toString(i))),
                new RecordHeader("empty", i % 2 == 0 ? null : new byte[0]));
        return new ProducerRecord<>(topic, 0, timestamp, bytes(key), bytes(value), headers);
    }

    /** Sends each record, waits for every future, and checks the offsets run on from `first`. */
    private static List<RecordMetadata> sendAll(KafkaProducer<byte[], byte[]> producer,
            List<ProducerRecord<byte[], byte[]>> records, long first) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> record : records) {
            futures.add(producer.send(record));
        }
        producer.flush();
        List<RecordMetadata> acks = new ArrayList<>();
        for (int i = 0; i < futures.size(); i++) {
            RecordMetadata ack = futures.get(i).get();
            expectEq(first + i, ack.offset(), "offset of record " + i);
            expectEq(0, ack.partition(), "partition of record " + i);
            acks.add(ack);
        }
        return acks;
    }

    /** Every record of a topic's partition 0 from `from` up to its end offset, by a consumer without a group. */
    private List<ConsumerRecord<byte[], byte[]>> readAll(String topic, long from) {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(Map.of())) {
            consumer.assign(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            consumer.seek(tp, from);
            List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (consumer.position(tp) < end) {
                check(System.nanoTime() < deadline, () -> "reading " + topic + ": position "
                        + consumer.position(tp) + " has not reached " + end + " in " + DEADLINE);
                consumer.poll(POLL).forEach(records::add);
            }
            return records;
        }
    }

    private static void expectSameRecords(List<ProducerRecord<byte[], byte[]>> sent,
            List<ConsumerRecord<byte[], byte[]>> got, long firstOffset) {
        expectEq(sent.size(), got.size(), "number of records read");
        for (int i = 0; i < sent.size(); i++) {
            ProducerRecord<byte[], byte[]> s = sent.get(i);
            ConsumerRecord<byte[], byte[]> g = got.get(i);
            String at = "record " + i;
            expectEq(firstOffset + i, g.offset(), "offset of " + at);
            check(Arrays.equals(s.key(), g.key()), () -> "key of " + at + ": " + string(g.key()));
            check(Arrays.equals(s.value(), g.value()), () -> "value of " + at + ": " + string(g.value()));
            List<String> sentHeaders = Arrays.stream(s.headers().toArray()).map(KpfsJavaClient::header).toList();
            List<String> gotHeaders = Arrays.stream(g.headers().toArray()).map(KpfsJavaClient::header).toList();
            expectEq(sentHeaders, gotHeaders, "headers of " + at);
            if (s.timestamp() != null) {
                expectEq(s.timestamp(), g.timestamp(), "timestamp of " + at);
            }
        }
    }

    private static String header(Header h) {
        return h.key() + "=" + (h.value() == null ? "null" : string(h.value()));
    }

    /** The batches kpfs wrote for a topic's partition, read from its segment files. */
    private List<RecordBatch> batchesOnDisk(String topic) throws IOException {
        List<RecordBatch> batches = new ArrayList<>();
        try (Stream<Path> files = Files.list(dataDir.resolve(topic + "-0"))) {
            for (Path segment : files.filter(p -> p.toString().endsWith(".log")).sorted().toList()) {
                MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(segment)))
                        .batches().forEach(batches::add);
            }
        }
        return batches;
    }

    private static double metric(KafkaProducer<?, ?> producer, String name) {
        for (Map.Entry<MetricName, ? extends Metric> m : producer.metrics().entrySet()) {
            if (m.getKey().group().equals("producer-metrics") && m.getKey().name().equals(name)) {
                return ((Number) m.getValue().metricValue()).doubleValue();
            }
        }
        throw new CheckFailed("no producer metric " + name);
    }

    // ---- Scenarios ----

    private void runAll() throws Exception {
        producerScenarios();
        consumerScenarios();
        adminScenarios();
    }

    private static final int N = 1000;

    private void producerScenarios() throws Exception {
        String topic = "java-produce";
        List<ProducerRecord<byte[], byte[]>> sent = IntStream.range(0, N)
                .mapToObj(i -> workloadRecord(topic, i, null)).toList();
        long[] producerId = new long[1];

        scenario("produce", () -> {
            createTopic(topic, Map.of());
            try (KafkaProducer<byte[], byte[]> producer = producer(Map.of())) {
                sendAll(producer, sent, 0);
                expectEq((double) N, metric(producer, "record-send-total"), "record-send-total");
                expectEq(0.0, metric(producer, "record-error-total"), "record-error-total");
                expectEq(0.0, metric(producer, "record-retry-total"), "record-retry-total");
                expectEq(0.0, metric(producer, "produce-throttle-time-max"), "produce-throttle-time-max");
                double batchSize = metric(producer, "batch-size-avg");
                check(batchSize > 0 && batchSize <= 16384, () -> "batch-size-avg " + batchSize);
                expectEq(1.0, metric(producer, "compression-rate-avg"), "compression-rate-avg");
                check(metric(producer, "request-total") > 0, () -> "request-total is 0");
                return N + " records with the defaults (idempotent, acks=all, linger.ms=5); offsets 0.."
                        + (N - 1) + "; batch-size-avg " + Math.round(batchSize);
            }
        });

        scenario("produce-idempotent", () -> {
            List<RecordBatch> batches = batchesOnDisk(topic);
            producerId[0] = batches.get(0).producerId();
            check(producerId[0] >= 0, () -> "producer id " + producerId[0]);
            long sequence = 0;
            for (RecordBatch batch : batches) {
                expectEq(producerId[0], batch.producerId(), "producer id of the batch at " + batch.baseOffset());
                expectEq((short) 0, batch.producerEpoch(), "producer epoch of the batch at " + batch.baseOffset());
                expectEq((int) sequence, batch.baseSequence(), "base sequence of the batch at " + batch.baseOffset());
                check(!batch.isTransactional(), () -> "a transactional batch at " + batch.baseOffset());
                sequence += batch.lastOffset() - batch.baseOffset() + 1;
            }
            // A restarted producer gets a new id and starts its sequences again at 0.
            List<ProducerRecord<byte[], byte[]>> more = IntStream.range(0, 10)
                    .mapToObj(i -> workloadRecord(topic, i, null)).toList();
            try (KafkaProducer<byte[], byte[]> producer = producer(Map.of())) {
                sendAll(producer, more, N);
            }
            List<RecordBatch> after = batchesOnDisk(topic).stream().filter(b -> b.baseOffset() >= N).toList();
            check(!after.isEmpty(), () -> "no batch at offset " + N + " on disk");
            long restartedId = after.get(0).producerId();
            check(restartedId >= 0 && restartedId != producerId[0],
                    () -> "the restarted producer's id " + restartedId + " (the first's: " + producerId[0] + ")");
            expectEq((short) 0, after.get(0).producerEpoch(), "the restarted producer's epoch");
            expectEq(0, after.get(0).baseSequence(), "the restarted producer's first sequence");
            return batches.size() + " batches of producer " + producerId[0] + " epoch 0, sequences 0.."
                    + (sequence - 1) + "; restarted: producer " + restartedId + " epoch 0 from sequence 0";
        });

        scenario("consume-from-beginning", () -> {
            expectSameRecords(sent, readAll(topic, 0).subList(0, N), 0);
            return N + " records read back: keys, null keys and values, headers as sent";
        });

        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            scenario("produce-compressed-" + codec, () -> {
                String t = "java-" + codec;
                createTopic(t, Map.of());
                List<ProducerRecord<byte[], byte[]>> records = IntStream.range(0, 300)
                        .mapToObj(i -> workloadRecord(t, i, null)).toList();
                double rate;
                try (KafkaProducer<byte[], byte[]> producer = producer(Map.of(
                        ProducerConfig.COMPRESSION_TYPE_CONFIG, codec))) {
                    sendAll(producer, records, 0);
                    rate = metric(producer, "compression-rate-avg");
                    check(rate > 0 && rate < 1, () -> "compression-rate-avg " + metric(producer, "compression-rate-avg"));
                    expectEq(0.0, metric(producer, "record-error-total"), "record-error-total");
                }
                Set<CompressionType> stored = batchesOnDisk(t).stream().map(RecordBatch::compressionType)
                        .collect(Collectors.toSet());
                expectEq(Set.of(CompressionType.forName(codec)), stored, "codecs of the stored batches");
                expectSameRecords(records, readAll(t, 0), 0);
                return "300 records stored as " + codec + " batches and read back; compression-rate-avg "
                        + String.format("%.2f", rate);
            });
        }

        scenario("produce-too-large", () -> {
            String t = "java-too-large";
            createTopic(t, Map.of("max.message.bytes", "2000"));
            try (KafkaProducer<byte[], byte[]> producer = producer(Map.of())) {
                // Over the topic's max.message.bytes: the broker refuses it (MESSAGE_TOO_LARGE).
                RecordTooLargeException byBroker = failure(
                        producer.send(new ProducerRecord<>(t, new byte[3000])), RecordTooLargeException.class,
                        "a 3000-byte record to a topic with max.message.bytes=2000");
                // Kafka answers it with the code alone: the client's words.
                expectEq("The request included a message larger than the max message size the server will accept.",
                        byBroker.getMessage(), "the broker's refusal");
                // Over the producer's max.request.size (1 MiB): refused before it is sent.
                RecordTooLargeException byClient = failure(
                        producer.send(new ProducerRecord<>(t, new byte[2 << 20])), RecordTooLargeException.class,
                        "a 2 MiB record");
                check(byClient.getMessage().contains("max.request.size"), () -> "the 2 MiB refusal: " + byClient);
                // The producer goes on: its next record is the topic's first.
                RecordMetadata ack = producer.send(new ProducerRecord<>(t, bytes("small"))).get();
                expectEq(0L, ack.offset(), "offset of the record after the refusals");
                return "broker: " + byBroker.getMessage() + " | client: " + byClient.getMessage();
            }
        });

        scenario("produce-unknown-topic", () -> {
            try (KafkaProducer<byte[], byte[]> producer = producer(Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, 2000))) {
                TimeoutException e = failure(producer.send(new ProducerRecord<>("java-no-such-topic", bytes("x"))),
                        TimeoutException.class, "a record to a topic that does not exist (auto-create off)");
                check(e.getMessage().contains("not present in metadata"), () -> e.toString());
                return e.getMessage();
            }
        });
        check(admin.listTopics().names().get().stream().noneMatch(n -> n.equals("java-no-such-topic")),
                () -> "the unknown topic was created");

        scenario("produce-acks", () -> {
            String t = "java-acks";
            createTopic(t, Map.of());
            List<ProducerRecord<byte[], byte[]>> records = IntStream.range(0, 10)
                    .mapToObj(i -> workloadRecord(t, i, null)).toList();
            // acks other than all turn the default idempotence off.
            try (KafkaProducer<byte[], byte[]> producer = producer(Map.of(ProducerConfig.ACKS_CONFIG, "1"))) {
                sendAll(producer, records, 0);
            }
            try (KafkaProducer<byte[], byte[]> producer = producer(Map.of(ProducerConfig.ACKS_CONFIG, "0"))) {
                List<Future<RecordMetadata>> futures = records.stream().map(producer::send).toList();
                producer.flush();
                for (Future<RecordMetadata> f : futures) {
                    expectEq(-1L, f.get().offset(), "offset acks=0 reports");
                }
            }
            expectSameRecords(Stream.concat(records.stream(), records.stream()).toList(), readAll(t, 0), 0);
            List<RecordBatch> batches = batchesOnDisk(t);
            check(batches.stream().allMatch(b -> b.producerId() == RecordBatch.NO_PRODUCER_ID),
                    () -> "a batch with a producer id from a producer that is not idempotent");
            return "acks=1: offsets 0..9; acks=0: offset -1 reported, 10..19 stored; no producer id";
        });
    }

    private static final String GROUP = "java-group";
    private static final List<String> GROUP_TOPICS = List.of("java-g0", "java-g1", "java-g2", "java-g3");
    private static final int PER_TOPIC = 25;

    /**
     * A member of GROUP subscribed to GROUP_TOPICS that commits what it consumed of a
     * partition when the partition is taken from it, so its next owner goes on from there.
     */
    private KafkaConsumer<byte[], byte[]> groupMember(String clientId) {
        // The classic protocol (Kafka 4.3.1's default) with the cooperative sticky assignor
        // (the group's two members share the four partitions); heartbeats every 500 ms so a
        // rebalance reaches the member that stays within a second.
        KafkaConsumer<byte[], byte[]> member = consumer(Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, GROUP,
                ConsumerConfig.CLIENT_ID_CONFIG, clientId,
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
                ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500));
        member.subscribe(GROUP_TOPICS, new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                member.commitSync(partitions.stream().collect(Collectors.toMap(tp -> tp,
                        tp -> new OffsetAndMetadata(member.position(tp)))));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            }
        });
        return member;
    }

    /** Polls each consumer in turn until `want` records arrived in all and `done` holds. */
    private static Map<TopicPartition, List<Long>> pollUntil(List<KafkaConsumer<byte[], byte[]>> consumers,
            int want, Supplier<Boolean> done) {
        Map<TopicPartition, List<Long>> offsets = new TreeMap<>(
                (a, b) -> a.toString().compareTo(b.toString()));
        int got = 0;
        long deadline = System.nanoTime() + DEADLINE.toNanos();
        while (got < want || !done.get()) {
            final int have = got;
            check(System.nanoTime() < deadline, () -> have + " of " + want + " records in " + DEADLINE
                    + ", assignments " + consumers.stream().map(c -> c.assignment().toString()).toList());
            for (KafkaConsumer<byte[], byte[]> c : consumers) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(POLL)) {
                    offsets.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), k -> new ArrayList<>())
                            .add(r.offset());
                    got++;
                }
            }
        }
        return offsets;
    }

    private static void expectOffsets(Map<TopicPartition, List<Long>> got, long from, long to, String what) {
        for (String t : GROUP_TOPICS) {
            List<Long> want = Stream.iterate(from, o -> o + 1).limit(to - from).toList();
            expectEq(want, got.getOrDefault(new TopicPartition(t, 0), List.of()), what + " of " + t);
        }
    }

    private static Set<TopicPartition> groupPartitions() {
        return GROUP_TOPICS.stream().map(t -> new TopicPartition(t, 0)).collect(Collectors.toSet());
    }

    private void produceToGroupTopics(int count) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = producer(Map.of())) {
            for (String t : GROUP_TOPICS) {
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(t, bytes("k" + i), bytes(t + " " + i)));
                }
            }
            producer.flush();
        }
    }

    private void consumerScenarios() throws Exception {
        KafkaConsumer<byte[], byte[]> stays = null;
        try {
            for (String t : GROUP_TOPICS) {
                createTopic(t, Map.of());
            }
            produceToGroupTopics(PER_TOPIC);
            KafkaConsumer<byte[], byte[]> first = groupMember("java-member-1");
            KafkaConsumer<byte[], byte[]> second = groupMember("java-member-2");
            stays = first;

            scenario("consume-group", () -> {
                Map<TopicPartition, List<Long>> got = pollUntil(List.of(first, second), 4 * PER_TOPIC,
                        () -> !first.assignment().isEmpty() && !second.assignment().isEmpty());
                expectOffsets(got, 0, PER_TOPIC, "offsets polled");
                Set<TopicPartition> both = new HashSet<>(first.assignment());
                both.addAll(second.assignment());
                expectEq(groupPartitions(), both, "the partitions the two members hold");
                check(first.assignment().stream().noneMatch(second.assignment()::contains),
                        () -> "both members hold " + first.assignment());
                String split = first.assignment().size() + "+" + second.assignment().size();
                first.commitSync();
                second.commitSync();
                // The second leaves: the first takes its partitions, from the offsets it committed.
                second.close();
                produceToGroupTopics(10);
                Map<TopicPartition, List<Long>> after = pollUntil(List.of(first), 40,
                        () -> first.assignment().size() == GROUP_TOPICS.size());
                expectOffsets(after, PER_TOPIC, PER_TOPIC + 10, "offsets polled after the rebalance");
                expectEq(groupPartitions(), first.assignment(), "the partitions the staying member holds");
                return "2 members (classic protocol, cooperative-sticky), 4 topics split " + split
                        + ", every record once; the one left took all 4 from the committed offsets";
            });

            scenario("commit-offsets", () -> {
                first.commitSync();
                Map<TopicPartition, OffsetAndMetadata> committed = first.committed(groupPartitions());
                for (TopicPartition tp : groupPartitions()) {
                    expectEq((long) PER_TOPIC + 10, committed.get(tp).offset(), "committed offset of " + tp);
                }
                TopicPartition tp = new TopicPartition(GROUP_TOPICS.get(0), 0);
                first.commitSync(Map.of(tp, new OffsetAndMetadata(7, "seven")));
                OffsetAndMetadata seven = first.committed(Set.of(tp)).get(tp);
                expectEq(7L, seven.offset(), "offset committed with metadata");
                expectEq("seven", seven.metadata(), "metadata committed");
                first.commitSync(Map.of(tp, new OffsetAndMetadata(PER_TOPIC + 10)));
                return "commitSync and committed(): " + (PER_TOPIC + 10) + " on each partition; metadata kept";
            });

            scenario("consume-from-offset", () -> {
                TopicPartition tp = new TopicPartition(GROUP_TOPICS.get(1), 0);
                first.seek(tp, 5);
                expectEq(5L, first.position(tp), "position after seek(5)");
                ConsumerRecord<byte[], byte[]> at5 = firstRecordOf(first, tp);
                expectEq(5L, at5.offset(), "offset of the first record after seek(5)");
                first.seekToBeginning(List.of(tp));
                expectEq(0L, firstRecordOf(first, tp).offset(), "offset of the first record after seekToBeginning");
                Map<TopicPartition, Long> end = first.endOffsets(groupPartitions());
                Map<TopicPartition, Long> beginning = first.beginningOffsets(groupPartitions());
                for (TopicPartition p : groupPartitions()) {
                    expectEq((long) PER_TOPIC + 10, end.get(p), "endOffsets of " + p);
                    expectEq(0L, beginning.get(p), "beginningOffsets of " + p);
                }
                return "seek, seekToBeginning, endOffsets, beginningOffsets";
            });

            scenario("consume-offsets-for-times", () -> {
                String t = "java-times";
                createTopic(t, Map.of());
                // Timestamps a minute apart, ending now: retention never acts on them.
                long base = System.currentTimeMillis() - 20 * 60_000L;
                List<ProducerRecord<byte[], byte[]>> records = IntStream.range(0, 20)
                        .mapToObj(i -> workloadRecord(t, i, base + i * 60_000L)).toList();
                try (KafkaProducer<byte[], byte[]> producer = producer(Map.of())) {
                    sendAll(producer, records, 0);
                }
                TopicPartition tp = new TopicPartition(t, 0);
                Map<TopicPartition, OffsetAndTimestamp> at = first.offsetsForTimes(Map.of(tp, base + 5 * 60_000L + 1));
                expectEq(6L, at.get(tp).offset(), "offsetsForTimes(the 6th's time - 59 s)");
                expectEq(base + 6 * 60_000L, at.get(tp).timestamp(), "timestamp offsetsForTimes found");
                Map<TopicPartition, OffsetAndTimestamp> past = first.offsetsForTimes(Map.of(tp, base + 3_600_000L));
                check(past.get(tp) == null, () -> "offsetsForTimes after the last record: " + past.get(tp));
                expectSameRecords(records, readAll(t, 0), 0);
                return "offsetsForTimes finds offset 6, none after the last record; timestamps read back";
            });
            first.close();
            stays = null;
        } finally {
            if (stays != null) {
                stays.close();
            }
        }

        // Kafka 4.3.1's consumers default to the classic protocol; this one asks for
        // KIP-848's, which kpfs does not serve: the client must say so, not hang.
        scenario("consume-group-consumer-protocol", () -> {
            try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, "java-kip848",
                    ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer"))) {
                c.subscribe(List.of(GROUP_TOPICS.get(0)));
                long deadline = System.nanoTime() + DEADLINE.toNanos();
                while (c.assignment().isEmpty()) {
                    check(System.nanoTime() < deadline, () -> "group.protocol=consumer: no assignment and no refusal in "
                            + DEADLINE);
                    try {
                        c.poll(POLL);
                    } catch (UnsupportedVersionException e) {
                        throw new Unsupported("group.protocol=consumer (KIP-848): kpfs does not serve "
                                + "ConsumerGroupHeartbeat; poll() throws \"" + e.getMessage() + "\"");
                    }
                }
                return "group.protocol=consumer: assigned " + c.assignment();
            }
        });

        // A consumer with the defaults but a group id: auto.offset.reset=latest, offsets
        // committed automatically, and at close.
        scenario("consume-group-auto-commit", () -> {
            String t = "java-auto";
            createTopic(t, Map.of());
            try (KafkaProducer<byte[], byte[]> producer = producer(Map.of())) {
                sendAll(producer, IntStream.range(0, 3).mapToObj(i -> workloadRecord(t, i, null)).toList(), 0);
            }
            TopicPartition tp = new TopicPartition(t, 0);
            Map<String, Object> config = Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                    ConsumerConfig.GROUP_ID_CONFIG, "java-auto");
            long end;
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(config, new ByteArrayDeserializer(),
                    new ByteArrayDeserializer())) {
                c.subscribe(List.of(t));
                long deadline = System.nanoTime() + DEADLINE.toNanos();
                while (c.assignment().isEmpty()) {
                    check(System.nanoTime() < deadline, () -> "no assignment in " + DEADLINE);
                    check(c.poll(POLL).isEmpty(), () -> "records before any was produced (latest)");
                }
                end = c.position(tp);
                expectEq(c.endOffsets(List.of(tp)).get(tp), end, "the position auto.offset.reset=latest gives");
                try (KafkaProducer<byte[], byte[]> producer = producer(Map.of())) {
                    sendAll(producer, IntStream.range(0, 5).mapToObj(i -> workloadRecord(t, i, null)).toList(), end);
                }
                Map<TopicPartition, List<Long>> got = pollUntil(List.of(c), 5, () -> true);
                expectEq(List.of(end, end + 1, end + 2, end + 3, end + 4), got.get(tp), "offsets polled");
            }
            long committed = admin.listConsumerGroupOffsets("java-auto").partitionsToOffsetAndMetadata().get()
                    .get(tp).offset();
            expectEq(end + 5, committed, "the offset committed at close");
            return "latest: started at " + end + ", polled 5, " + committed + " committed at close";
        });

        // Static membership (KIP-345): a member with group.instance.id stays in the group
        // when it closes, and takes its place again without a rebalance when it comes back.
        scenario("consume-group-static", () -> {
            String group = "java-static";
            Map<String, Object> config = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group,
                    ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "java-static-1");
            String memberId;
            try (KafkaConsumer<byte[], byte[]> c = consumer(config)) {
                c.subscribe(List.of(GROUP_TOPICS.get(3)));
                pollUntil(List.of(c), PER_TOPIC + 10, () -> !c.assignment().isEmpty());
                memberId = c.groupMetadata().memberId();
                c.commitSync();
            }
            ConsumerGroupDescription closed = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            expectEq(GroupState.STABLE, closed.groupState(), "state after the static member closed");
            MemberDescription kept = closed.members().iterator().next();
            expectEq(Optional.of("java-static-1"), kept.groupInstanceId(), "the member kept");
            expectEq(memberId, kept.consumerId(), "its member id");
            try (KafkaConsumer<byte[], byte[]> c = consumer(config)) {
                c.subscribe(List.of(GROUP_TOPICS.get(3)));
                long deadline = System.nanoTime() + DEADLINE.toNanos();
                while (c.assignment().isEmpty()) {
                    check(System.nanoTime() < deadline, () -> "no assignment in " + DEADLINE);
                    check(c.poll(POLL).isEmpty(), () -> "records again after the committed offset");
                }
                ConsumerGroupDescription back = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                expectEq(1, back.members().size(), "members after the static member came back");
                expectEq(Optional.of("java-static-1"),
                        back.members().iterator().next().groupInstanceId(), "the member back");
            }
            return "closed: still a member (Stable); back with the same instance id, at its committed offset";
        });
    }

    private static ConsumerRecord<byte[], byte[]> firstRecordOf(KafkaConsumer<byte[], byte[]> consumer,
            TopicPartition tp) {
        Set<TopicPartition> others = new HashSet<>(consumer.assignment());
        others.remove(tp);
        consumer.pause(others);
        try {
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
                if (!records.records(tp).isEmpty()) {
                    return records.records(tp).get(0);
                }
            }
            throw new CheckFailed("no record of " + tp + " in " + DEADLINE);
        } finally {
            consumer.resume(others);
        }
    }

    /** A scenario for an Admin call kpfs does not serve: the client must refuse it as such. */
    private void unsupportedAdmin(String name, String reason, Supplier<Future<?>> call) throws IOException {
        scenario(name, () -> {
            try {
                call.get().get();
            } catch (ExecutionException e) {
                if (e.getCause() instanceof UnsupportedVersionException) {
                    throw new Unsupported(reason + "; the client: " + e.getCause().getMessage());
                }
                throw e;
            }
            return "served";
        });
    }

    private static ConfigEntry configOf(Map<ConfigResource, Config> configs, ConfigResource resource, String name) {
        ConfigEntry entry = configs.get(resource).get(name);
        check(entry != null, () -> resource + " lacks " + name);
        return entry;
    }

    private Map<ConfigResource, Config> describe(ConfigResource resource) throws Exception {
        return admin.describeConfigs(List.of(resource)).all().get();
    }

    // listConsumerGroups, deprecated for removal in favour of listGroups, is still what
    // applications written for Kafka 3 call.
    @SuppressWarnings("removal")
    private void adminScenarios() throws Exception {
        String topic = "java-admin";
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);

        scenario("admin-create-topics", () -> {
            NewTopic t = new NewTopic(topic, 1, (short) 1).configs(Map.of("retention.ms", "86400000",
                    "cleanup.policy", "delete"));
            admin.createTopics(List.of(t), new CreateTopicsOptions().validateOnly(true)).all().get();
            check(!admin.listTopics().names().get().contains(topic), () -> "validateOnly created " + topic);
            admin.createTopics(List.of(t)).all().get();
            failure(admin.createTopics(List.of(t)).all(), TopicExistsException.class, "creating it again");
            InvalidConfigurationException bad = failure(admin.createTopics(List.of(new NewTopic("java-bad", 1,
                    (short) 1).configs(Map.of("retention.ms", "soon")))).all(),
                    InvalidConfigurationException.class, "a topic with retention.ms=soon");
            CreateTopicsResult three = admin.createTopics(List.of(new NewTopic("java-three", 3, (short) 1)));
            expectEq(3, three.numPartitions("java-three").get(), "java-three's partitions, as created");
            expectEq(3, admin.describeTopics(List.of("java-three")).allTopicNames().get().get("java-three")
                    .partitions().size(), "java-three's partitions, described");
            InvalidPartitionsException none = failure(admin.createTopics(List.of(new NewTopic("java-none", 0,
                    (short) 1))).all(), InvalidPartitionsException.class, "a topic of 0 partitions");
            check(!admin.listTopics().names().get().contains("java-bad"), () -> "the refused topic exists");
            Uuid id = admin.createTopics(List.of(new NewTopic("java-admin-id", 1, (short) 1))).topicId("java-admin-id").get();
            check(!id.equals(Uuid.ZERO_UUID), () -> "the created topic's id is zero");
            return "with configs, validateOnly, exists, 3 partitions; refused: " + bad.getMessage() + " | "
                    + none.getMessage();
        });

        scenario("admin-list-topics", () -> {
            Set<String> names = admin.listTopics().names().get();
            check(names.containsAll(List.of(topic, "java-produce", "java-g0")), () -> "listTopics: " + names);
            check(!names.contains("__consumer_offsets"), () -> "listTopics lists __consumer_offsets");
            Set<String> all = admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get();
            check(all.contains("__consumer_offsets"), () -> "listTopics(listInternal) lacks __consumer_offsets");
            return names.size() + " topics; __consumer_offsets with listInternal";
        });

        scenario("admin-describe-topics", () -> {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            expectEq(1, d.partitions().size(), "partitions");
            expectEq(1, d.partitions().get(0).leader().id(), "leader");
            expectEq(1, d.partitions().get(0).replicas().size(), "replicas");
            expectEq(1, d.partitions().get(0).isr().size(), "isr");
            check(!d.isInternal(), () -> "internal");
            check(!d.topicId().equals(Uuid.ZERO_UUID), () -> "zero topic id");
            UnknownTopicOrPartitionException missing = failure(admin.describeTopics(List.of("java-missing"))
                    .allTopicNames(), UnknownTopicOrPartitionException.class, "describing a missing topic");
            return "1 partition led by node 1, topic id " + d.topicId() + "; missing: " + missing.getMessage();
        });

        scenario("admin-describe-configs", () -> {
            ConfigEntry retention = configOf(describe(topicResource), topicResource, "retention.ms");
            expectEq("86400000", retention.value(), "retention.ms");
            expectEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "retention.ms's source");
            ConfigEntry segment = configOf(describe(topicResource), topicResource, "segment.bytes");
            expectEq(ConfigEntry.ConfigSource.DEFAULT_CONFIG, segment.source(), "segment.bytes's source");
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
            ConfigEntry auto = configOf(describe(broker), broker, "auto.create.topics.enable");
            expectEq("false", auto.value(), "auto.create.topics.enable");
            expectEq(ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG, auto.source(), "its source");
            check(auto.isReadOnly(), () -> "auto.create.topics.enable is not read-only");
            return "topic: retention.ms DYNAMIC_TOPIC_CONFIG, segment.bytes DEFAULT_CONFIG; broker 1: "
                    + describe(broker).get(broker).entries().size() + " configs";
        });

        scenario("admin-alter-configs", () -> {
            admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                    .all().get();
            Map<ConfigResource, Config> c = describe(topicResource);
            expectEq("3600000", configOf(c, topicResource, "retention.ms").value(), "retention.ms after SET");
            expectEq("delete,compact", configOf(c, topicResource, "cleanup.policy").value(), "cleanup.policy after APPEND");
            admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
            ConfigEntry deleted = configOf(describe(topicResource), topicResource, "retention.ms");
            expectEq(ConfigEntry.ConfigSource.DEFAULT_CONFIG, deleted.source(), "retention.ms's source after DELETE");
            InvalidConfigurationException bad = failure(admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all(),
                    InvalidConfigurationException.class, "retention.ms=soon");
            return "incrementalAlterConfigs SET, APPEND, DELETE; refused: " + bad.getMessage();
        });

        TopicPartition produced = new TopicPartition("java-times", 0);
        scenario("admin-list-offsets", () -> {
            long earliest = admin.listOffsets(Map.of(produced, OffsetSpec.earliest())).partitionResult(produced).get().offset();
            long latest = admin.listOffsets(Map.of(produced, OffsetSpec.latest())).partitionResult(produced).get().offset();
            ListOffsetsResultInfo max = admin.listOffsets(Map.of(produced, OffsetSpec.maxTimestamp()))
                    .partitionResult(produced).get();
            expectEq(0L, earliest, "earliest");
            expectEq(20L, latest, "latest");
            expectEq(19L, max.offset(), "max-timestamp's offset");
            long sixth = readAll(produced.topic(), 6).get(0).timestamp();
            ListOffsetsResultInfo byTime = admin.listOffsets(Map.of(produced, OffsetSpec.forTimestamp(sixth - 1)))
                    .partitionResult(produced).get();
            expectEq(6L, byTime.offset(), "forTimestamp(the 6th's time - 1 ms)");
            expectEq(sixth, byTime.timestamp(), "the timestamp forTimestamp found");
            return "earliest 0, latest 20, max-timestamp 19, forTimestamp 6";
        });

        scenario("admin-delete-records", () -> {
            long low = admin.deleteRecords(Map.of(produced, RecordsToDelete.beforeOffset(8))).lowWatermarks()
                    .get(produced).get().lowWatermark();
            expectEq(8L, low, "low watermark");
            expectEq(8L, admin.listOffsets(Map.of(produced, OffsetSpec.earliest())).partitionResult(produced).get()
                    .offset(), "earliest after deleteRecords");
            expectEq(8L, readAll(produced.topic(), 8).get(0).offset(), "first record read");
            KafkaException beyond = failure(admin.deleteRecords(Map.of(produced, RecordsToDelete.beforeOffset(99)))
                    .all(), KafkaException.class, "deleting beyond the high watermark");
            return "low watermark 8; beyond the end: " + beyond.getMessage();
        });

        scenario("admin-list-groups", () -> {
            var consumerGroups = admin.listConsumerGroups().all().get();
            check(consumerGroups.stream().anyMatch(g -> g.groupId().equals(GROUP)),
                    () -> "listConsumerGroups: " + consumerGroups);
            Collection<GroupListing> groups = admin.listGroups().all().get();
            GroupListing g = groups.stream().filter(l -> l.groupId().equals(GROUP)).findFirst()
                    .orElseThrow(() -> new CheckFailed("listGroups lacks " + GROUP + ": " + groups));
            expectEq(Optional.of(GroupType.CLASSIC), g.type(), "type");
            expectEq("consumer", g.protocol(), "protocol type");
            expectEq(Optional.of(GroupState.EMPTY), g.groupState(), "state");
            return "listConsumerGroups and listGroups: " + GROUP + " classic, consumer, Empty";
        });

        scenario("admin-describe-groups", () -> {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(GROUP)).all().get().get(GROUP);
            expectEq(GroupState.EMPTY, d.groupState(), "state");
            expectEq(GroupType.CLASSIC, d.type(), "type");
            expectEq(1, d.coordinator().id(), "coordinator");
            check(d.members().isEmpty(), () -> "members of an empty group: " + d.members());
            // A live member, described with its assignment.
            try (KafkaConsumer<byte[], byte[]> member = groupMember("java-member-3")) {
                long deadline = System.nanoTime() + DEADLINE.toNanos();
                while (member.assignment().size() < GROUP_TOPICS.size()) {
                    check(System.nanoTime() < deadline, () -> "no assignment in " + DEADLINE);
                    member.poll(POLL);
                }
                ConsumerGroupDescription live = admin.describeConsumerGroups(List.of(GROUP)).all().get().get(GROUP);
                expectEq(GroupState.STABLE, live.groupState(), "state with a member");
                expectEq("cooperative-sticky", live.partitionAssignor(), "assignor");
                MemberDescription m = live.members().iterator().next();
                expectEq("java-member-3", m.clientId(), "member's client id");
                expectEq(groupPartitions(), m.assignment().topicPartitions(), "member's assignment");
            }
            return "Empty, then Stable with one member (client id, host, assignment)";
        });

        TopicPartition g0 = new TopicPartition(GROUP_TOPICS.get(0), 0);
        scenario("admin-list-group-offsets", () -> {
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(GROUP)
                    .partitionsToOffsetAndMetadata().get();
            expectEq(groupPartitions(), offsets.keySet(), "partitions with offsets");
            for (OffsetAndMetadata o : offsets.values()) {
                expectEq((long) PER_TOPIC + 10, o.offset(), "committed offset");
            }
            return "4 partitions at " + (PER_TOPIC + 10);
        });

        scenario("admin-alter-group-offsets", () -> {
            admin.alterConsumerGroupOffsets(GROUP, Map.of(g0, new OffsetAndMetadata(3))).all().get();
            expectEq(3L, admin.listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata().get().get(g0).offset(),
                    "offset after alterConsumerGroupOffsets");
            return g0 + " set to 3 and read back";
        });

        scenario("admin-delete-group-offsets", () -> {
            admin.deleteConsumerGroupOffsets(GROUP, Set.of(g0)).all().get();
            Map<TopicPartition, OffsetAndMetadata> left = admin.listConsumerGroupOffsets(GROUP)
                    .partitionsToOffsetAndMetadata().get();
            check(!left.containsKey(g0), () -> "offset of " + g0 + " still there: " + left.get(g0));
            expectEq(GROUP_TOPICS.size() - 1, left.size(), "partitions with offsets left");
            return g0 + "'s offset deleted, 3 left";
        });

        scenario("admin-delete-groups", () -> {
            admin.deleteConsumerGroups(List.of(GROUP)).all().get();
            check(admin.listGroups().all().get().stream().noneMatch(l -> l.groupId().equals(GROUP)),
                    () -> GROUP + " still listed");
            var missing = failure(admin.deleteConsumerGroups(List.of(GROUP)).all(),
                    GroupIdNotFoundException.class, "deleting it again");
            return "deleted; again: " + missing.getMessage();
        });

        scenario("admin-describe-cluster", () -> {
            DescribeClusterResult c = admin.describeCluster();
            String clusterId = c.clusterId().get();
            String meta = Files.readString(dataDir.resolve("meta.properties"));
            check(meta.contains("cluster.id=" + clusterId + "\n"), () -> "cluster id " + clusterId + " not in meta.properties");
            expectEq(1, c.nodes().get().size(), "nodes");
            expectEq(1, c.controller().get().id(), "controller");
            expectEq(bootstrap, c.nodes().get().iterator().next().host() + ":" + c.nodes().get().iterator().next().port(),
                    "the node's address");
            return "cluster " + clusterId + ", node 1 is the controller";
        });

        scenario("admin-describe-features", () -> {
            // kpfs levels one feature, transaction.version (0 to 2, finalized at Kafka
            // 4.3.1's default 2), and serves none of the other protocols Kafka's feature
            // levels switch on (KRaft metadata versions, KIP-848 groups, share and streams
            // groups): ApiVersions lists that one alone (docs/KAFKA-PROTOCOL.md).
            FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
            expectEq(Set.of("transaction.version"), f.supportedFeatures().keySet(), "supported features");
            var supported = f.supportedFeatures().get("transaction.version");
            expectEq(List.of((short) 0, (short) 2), List.of(supported.minVersion(), supported.maxVersion()),
                    "transaction.version's supported range");
            expectEq(Set.of("transaction.version"), f.finalizedFeatures().keySet(), "finalized features");
            var finalized = f.finalizedFeatures().get("transaction.version");
            expectEq(List.of((short) 2, (short) 2), List.of(finalized.minVersionLevel(), finalized.maxVersionLevel()),
                    "transaction.version's finalized level");
            expectEq(Optional.of(0L), f.finalizedFeaturesEpoch(), "finalized features epoch");
            return "transaction.version supported 0-2, finalized at 2 (epoch 0); no other feature";
        });

        // Admin calls whose APIs kpfs does not serve: the client's refusal, and why.
        // CreatePartitions: java-three (admin-create-topics) grows to 5, validateOnly first;
        // fewer is refused in Kafka's words; a producer writes to the new partition 4.
        scenario("admin-create-partitions", () -> {
            String grown = "java-three";
            IntSupplier count = () -> {
                try {
                    return admin.describeTopics(List.of(grown)).allTopicNames().get().get(grown).partitions().size();
                } catch (InterruptedException | ExecutionException e) {
                    throw new IllegalStateException(e);
                }
            };
            admin.createPartitions(Map.of(grown, NewPartitions.increaseTo(5)),
                    new CreatePartitionsOptions().validateOnly(true)).all().get();
            expectEq(3, count.getAsInt(), "partitions after validateOnly");
            admin.createPartitions(Map.of(grown, NewPartitions.increaseTo(5))).all().get();
            expectEq(5, count.getAsInt(), "partitions after increaseTo(5)");
            InvalidPartitionsException fewer = failure(admin.createPartitions(Map.of(grown,
                    NewPartitions.increaseTo(2))).all(), InvalidPartitionsException.class, "increaseTo(2)");
            expectEq("The topic java-three currently has 5 partition(s); 2 would not be an increase.",
                    fewer.getMessage(), "increaseTo(2)'s refusal");
            InvalidPartitionsException same = failure(admin.createPartitions(Map.of(grown,
                    NewPartitions.increaseTo(5))).all(), InvalidPartitionsException.class, "increaseTo(5) again");
            expectEq("Topic already has 5 partition(s).", same.getMessage(), "increaseTo(5)'s refusal");
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
                RecordMetadata m = p.send(new ProducerRecord<>(grown, 4, null, "in 4".getBytes())).get();
                expectEq(4, m.partition(), "the partition written");
                expectEq(0L, m.offset(), "its offset");
            }
            return "3 -> 5 (validateOnly first), a record in partition 4; refused: " + fewer.getMessage();
        });
        unsupportedAdmin("admin-describe-log-dirs", "DescribeLogDirs is not served",
                () -> admin.describeLogDirs(List.of(1)).allDescriptions());
        // The producer state kpfs keeps: the two producers of java-produce as their batches
        // on disk say (produce-idempotent), each at the last sequence it sent.
        scenario("admin-describe-producers", () -> {
            TopicPartition tp = new TopicPartition("java-produce", 0);
            Map<Long, Integer> lastSequence = new TreeMap<>();
            Map<Long, Long> lastTimestamp = new TreeMap<>();
            for (RecordBatch b : batchesOnDisk(tp.topic())) {
                lastSequence.put(b.producerId(), b.lastSequence());
                lastTimestamp.put(b.producerId(), b.maxTimestamp());
            }
            List<ProducerState> active = admin.describeProducers(List.of(tp)).partitionResult(tp).get()
                    .activeProducers().stream().sorted(Comparator.comparingLong(ProducerState::producerId))
                    .toList();
            expectEq(List.copyOf(lastSequence.keySet()), active.stream().map(ProducerState::producerId).toList(),
                    "producer ids");
            for (ProducerState p : active) {
                expectEq(0, p.producerEpoch(), "epoch of producer " + p.producerId());
                expectEq(lastSequence.get(p.producerId()), p.lastSequence(), "last sequence of " + p.producerId());
                expectEq(lastTimestamp.get(p.producerId()), p.lastTimestamp(), "last timestamp of " + p.producerId());
                expectEq(OptionalInt.empty(), p.coordinatorEpoch(), "coordinator epoch");
                expectEq(OptionalLong.empty(), p.currentTransactionStartOffset(), "transaction start");
            }
            return active.size() + " producers, last sequences " + lastSequence.values() + ", as on disk";
        });
        // No authorizer, as a Kafka broker without one: the ACL calls say so.
        scenario("admin-acls", () -> {
            SecurityDisabledException described = failure(admin.describeAcls(AclBindingFilter.ANY).values(),
                    SecurityDisabledException.class, "describeAcls");
            expectEq("No Authorizer is configured on the broker", described.getMessage(), "describeAcls' refusal");
            AclBinding read = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
            SecurityDisabledException created = failure(admin.createAcls(List.of(read)).all(),
                    SecurityDisabledException.class, "createAcls");
            expectEq("No Authorizer is configured.", created.getMessage(), "createAcls' refusal");
            failure(admin.deleteAcls(List.of(AclBindingFilter.ANY)).all(), SecurityDisabledException.class,
                    "deleteAcls");
            return "describeAcls, createAcls, deleteAcls: " + created.getClass().getSimpleName() + " \""
                    + described.getMessage() + "\"";
        });
        // The transaction coordinator's view: none before any transactional producer; one
        // that committed is CompleteCommit, one with a transaction open is Ongoing (with its
        // partition and start time) until its abort makes it CompleteAbort. Producer ids as
        // their batches on disk say. kpfs writes the markers before it answers EndTxn, so the
        // states are final once commitTransaction returns (Kafka's may show PrepareCommit).
        scenario("admin-list-transactions", () -> {
            expectEq(List.of(), List.copyOf(admin.listTransactions().all().get()), "transactions before any");
            String txnTopic = "java-txn";
            TopicPartition tp = new TopicPartition(txnTopic, 0);
            createTopic(txnTopic, Map.of());
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-committed"))) {
                p.initTransactions();
                p.beginTransaction();
                sendAll(p, List.of(new ProducerRecord<>(txnTopic, 0, null, bytes("committed"))), 0);
                p.commitTransaction();
            }
            long committedId = batchesOnDisk(txnTopic).get(0).producerId();
            expectEq(List.of(new TransactionListing("java-committed", committedId, TransactionState.COMPLETE_COMMIT)),
                    List.copyOf(admin.listTransactions().all().get()), "listTransactions after the commit");
            TransactionDescription committed = admin.describeTransactions(List.of("java-committed"))
                    .description("java-committed").get();
            expectEq(TransactionState.COMPLETE_COMMIT, committed.state(), "java-committed's state");
            expectEq(committedId, committed.producerId(), "java-committed's producer id");
            expectEq(Set.of(), committed.topicPartitions(), "java-committed's partitions");
            // As Kafka's coordinator, the completed transaction's start time stays.
            check(committed.transactionStartTimeMs().isPresent(), () -> "java-committed has no start time");
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-open"))) {
                p.initTransactions();
                p.beginTransaction();
                long before = System.currentTimeMillis();
                sendAll(p, List.of(new ProducerRecord<>(txnTopic, 0, null, bytes("aborted"))), 2);
                long openId = batchesOnDisk(txnTopic).get(2).producerId();
                TransactionDescription open = admin.describeTransactions(List.of("java-open"))
                        .description("java-open").get();
                expectEq(TransactionState.ONGOING, open.state(), "java-open's state");
                expectEq(openId, open.producerId(), "java-open's producer id");
                expectEq(Set.of(tp), open.topicPartitions(), "java-open's partitions");
                check(open.transactionStartTimeMs().isPresent()
                        && open.transactionStartTimeMs().getAsLong() >= before - 1000,
                        () -> "java-open's start time: " + open.transactionStartTimeMs() + ", sent at " + before);
                expectEq(List.of(new TransactionListing("java-open", openId, TransactionState.ONGOING)),
                        List.copyOf(admin.listTransactions(new ListTransactionsOptions()
                                .filterStates(List.of(TransactionState.ONGOING))).all().get()),
                        "listTransactions of the Ongoing ones");
                expectEq(List.of("java-committed"), admin.listTransactions(new ListTransactionsOptions()
                        .filterProducerIds(List.of(committedId))).all().get().stream()
                        .map(TransactionListing::transactionalId).toList(), "listTransactions of its producer id");
                p.abortTransaction();
                expectEq(TransactionState.COMPLETE_ABORT, admin.describeTransactions(List.of("java-open"))
                        .description("java-open").get().state(), "java-open's state after its abort");
            }
            return "none at first; java-committed CompleteCommit, java-open Ongoing on " + tp
                    + " then CompleteAbort; filters by state and producer id";
        });
        unsupportedAdmin("admin-describe-metadata-quorum", "DescribeQuorum: kpfs has no KRaft quorum",
                () -> admin.describeMetadataQuorum().quorumInfo());

        scenario("admin-delete-topics", () -> {
            admin.deleteTopics(List.of(topic, "java-admin-id")).all().get();
            check(!admin.listTopics().names().get().contains(topic), () -> topic + " still listed");
            UnknownTopicOrPartitionException again = failure(admin.deleteTopics(List.of(topic)).all(),
                    UnknownTopicOrPartitionException.class, "deleting it again");
            return "deleted by name; again: " + again.getMessage();
        });
    }
}
