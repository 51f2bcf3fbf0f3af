// A Kafka Streams 4.3.1 word count with processing.guarantee=exactly_once_v2 against kpfs,
// one mode per run (tests/shell/t_kafka_streams.sh drives them, killing processes in
// between):
//   seed BOOTSTRAP FROM TO        writes lines FROM..TO-1 of the known text (line(i) below)
//                                 to wc-in; from 0, creates wc-in and wc-out first (3
//                                 partitions each)
//   run BOOTSTRAP STATE_DIR       the app (application.id "wc"): wc-in's lines -> words ->
//                                 groupBy word -> count -> wc-out, until SIGTERM; prints
//                                 "line I" as it reads line I (slowly, so that it can be
//                                 killed mid-way) and "state S" at each state change; its
//                                 changelog rolls a segment every 300 ms and is cleanable
//                                 at once, so that kpfs's cleaner compacts it as it runs
//   streams-protocol BOOTSTRAP STATE_DIR
//                                 the app with group.protocol=streams (KIP-1071), which
//                                 kpfs does not serve: prints the error its stream thread
//                                 dies of ("error: ..."), within 60 s
//   verify BOOTSTRAP N SECONDS [final]
//                                 reads wc-out read_committed, waiting up to SECONDS for
//                                 every word's count to reach its true count in line(0..N-1);
//                                 then each word's counts must be 1, 2, ..., true count in
//                                 order (no count skipped: an input's effect lost; none
//                                 repeated: one applied twice), and the group "wc" must have
//                                 committed wc-in's end offsets; with "final" (the app
//                                 stopped), no transaction may be left open in the app's
//                                 topics, and the app must have purged its repartition topic
// Each check prints "ok: ..." or throws; the exit status says which.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public final class KpfsWordCount {
    private static final String IN = "wc-in";
    private static final String OUT = "wc-out";
    private static final int PARTITIONS = 3;
    // The internal topics Streams makes: APPLICATION_ID-NAME-repartition and -changelog.
    private static final String REPARTITION = "wc-words-repartition";
    private static final String CHANGELOG = "wc-counts-changelog";
    private static final String[] WORDS = {
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
        "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    };

    private KpfsWordCount() {}

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "seed" -> seed(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]));
            case "run" -> run(args[1], args[2], args.length > 3 ? Integer.parseInt(args[3]) : 0);
            case "streams-protocol" -> streamsProtocol(args[1], args[2]);
            case "verify" -> verify(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                    args.length > 4 && args[4].equals("final"));
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
        System.out.println("ok: " + what);
    }

    /** Line i of the input: "i w w ...", 1 to 5 words with a skewed distribution (some
     *  words far more often than others, a word repeated within a line now and then). */
    static String line(int i) {
        StringBuilder b = new StringBuilder(Integer.toString(i));
        int n = 1 + i % 5;
        for (int j = 0; j < n; j++) {
            int w = (i * 7 + j * j * 3) % (j % 2 == 0 ? WORDS.length : 6);
            b.append(' ').append(WORDS[w]);
        }
        return b.toString();
    }

    static List<String> words(String line) {
        List<String> all = Arrays.asList(line.split(" "));
        return all.subList(1, all.size());
    }

    private static void seed(String bootstrap, int from, int to) throws Exception {
        if (from == 0) {
            Map<String, Object> admin = Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin a = Admin.create(admin)) {
                a.createTopics(List.of(new NewTopic(IN, PARTITIONS, (short) 1), new NewTopic(OUT, PARTITIONS, (short) 1)))
                        .all()
                        .get(60, TimeUnit.SECONDS);
            }
        }
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (KafkaProducer<String, String> p = new KafkaProducer<>(config, new StringSerializer(), new StringSerializer())) {
            for (int i = from; i < to; i++) {
                // Keyed by line number, so that the lines spread over the three partitions.
                p.send(new ProducerRecord<>(IN, Integer.toString(i), line(i)));
            }
            p.flush();
        }
        System.out.println("ok: seeded lines " + from + " to " + (to - 1));
    }

    private static Properties config(String bootstrap, String stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "wc");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        // No record cache: every input word is one count update in wc-out, so that the
        // counts of a word must go 1, 2, 3, ... without a gap.
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        return props;
    }

    /** Runs the app; a positive {@code commitIntervalMs} replaces Streams' 100 ms (EOS). */
    private static void run(String bootstrap, String stateDir, int commitIntervalMs) throws Exception {
        Properties props = config(bootstrap, stateDir);
        if (commitIntervalMs > 0) {
            props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitIntervalMs);
        }
        // Static membership: a restart after kill -9 takes the dead member's place at once
        // instead of waiting out its session.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), "wc-1");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
        // The repartition topic's consumed records deleted (DeleteRecords) every second
        // rather than every 30, so that a run of the test does it.
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        // Each record sent at once rather than lingering 100 ms (Streams' default) in the
        // producer: a kill then leaves a transaction open in kpfs with records in it, for
        // the restart to abort and read_committed readers to skip.
        props.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 0);

        KafkaStreams streams = new KafkaStreams(topology(true), props);
        // A thread that fails (kpfs killed under it, say) is replaced, as an application
        // that must go on would have it.
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("thread failed: " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.setStateListener((now, before) -> System.out.println("state " + now));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // Closing commits the open transaction and leaves the group: on a loaded
            // two-core machine that took more than 20 s, so the deadline is generous and
            // a close that still misses it says so with its time.
            long start = System.nanoTime();
            boolean closed = streams.close(Duration.ofSeconds(60));
            System.out.println("close " + (closed ? "done" : "timed out") + " in "
                    + (System.nanoTime() - start) / 1_000_000 + " ms");
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
    }

    private static org.apache.kafka.streams.Topology topology(boolean slow) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(IN)
                .flatMapValues(line -> {
                    if (slow) {
                        System.out.println("line " + line.substring(0, line.indexOf(' ')));
                        try {
                            Thread.sleep(3);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                    return words(line);
                })
                .groupBy((key, word) -> word, Grouped.as("words"))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                        .withLoggingEnabled(Map.of(
                                TopicConfig.SEGMENT_MS_CONFIG, "300",
                                TopicConfig.MIN_CLEANABLE_DIRTY_RATIO_CONFIG, "0.01",
                                TopicConfig.DELETE_RETENTION_MS_CONFIG, "100")))
                .toStream()
                .to(OUT, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    private static void streamsProtocol(String bootstrap, String stateDir) throws Exception {
        Properties props = config(bootstrap, stateDir);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "wc-streams-protocol");
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        CountDownLatch failed = new CountDownLatch(1);
        try (KafkaStreams streams = new KafkaStreams(topology(false), props)) {
            streams.setUncaughtExceptionHandler(e -> {
                System.out.println("error: " + e);
                failed.countDown();
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.start();
            check(failed.await(60, TimeUnit.SECONDS), "the stream thread died");
            streams.close(Duration.ofSeconds(10));
        }
    }

    private static List<TopicPartition> partitions(String topic) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    private static void verify(String bootstrap, int n, int seconds, boolean stopped) throws Exception {
        Map<String, Long> truth = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            words(line(i)).forEach(w -> truth.merge(w, 1L, Long::sum));
        }
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        Map<String, List<Long>> counts = new TreeMap<>();
        List<TopicPartition> out = partitions(OUT);
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(config, new StringDeserializer(), new LongDeserializer())) {
            c.assign(out);
            c.seekToBeginning(out);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (true) {
                // Everything up to the last stable offsets as they are now, then a look at
                // whether every word has reached its count.
                Map<TopicPartition, Long> end = c.endOffsets(out);
                while (out.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                    if (System.nanoTime() > deadline) {
                        throw new AssertionError("wc-out not read up to " + end + " in " + seconds + " s");
                    }
                    for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                        List<Long> seen = counts.computeIfAbsent(r.key(), k -> new ArrayList<>());
                        long previous = seen.isEmpty() ? 0 : seen.get(seen.size() - 1);
                        seen.add(r.value());
                        // A count that is not the previous plus one fails at once, rather
                        // than at the deadline, when the counts never reach the truth.
                        if (r.value() != previous + 1) {
                            throw new AssertionError(r.key() + ": count " + r.value() + " after " + previous + " at "
                                    + r.topic() + "-" + r.partition() + "@" + r.offset() + ", not one more");
                        }
                    }
                }
                boolean done = truth.entrySet().stream().allMatch(e -> {
                    List<Long> seen = counts.get(e.getKey());
                    return seen != null && seen.get(seen.size() - 1) >= e.getValue();
                });
                if (done) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("the counts did not reach the true counts in " + seconds + " s: "
                            + last(counts) + " (true: " + truth + ")");
                }
                Thread.sleep(200);
            }
        }
        check(counts.keySet().equals(truth.keySet()), "wc-out has the " + truth.size() + " words and no other: "
                + counts.keySet());
        long updates = 0;
        for (Map.Entry<String, Long> e : truth.entrySet()) {
            List<Long> seen = counts.get(e.getKey());
            List<Long> expected = new ArrayList<>();
            for (long k = 1; k <= e.getValue(); k++) {
                expected.add(k);
            }
            if (!seen.equals(expected)) {
                throw new AssertionError(e.getKey() + ": counts " + firstDifference(expected, seen)
                        + "; the true count is " + e.getValue());
            }
            updates += seen.size();
        }
        check(true, "every word's counts are 1, 2, ... its true count, in order, no count skipped or "
                + "repeated (" + updates + " committed updates of " + truth.size() + " words: " + truth + ")");

        Set<TopicPartition> in = new HashSet<>(partitions(IN));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, "wc");
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(config, new StringDeserializer(), new LongDeserializer())) {
            Map<TopicPartition, Long> end = c.endOffsets(in);
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(in);
            long total = end.values().stream().mapToLong(Long::longValue).sum();
            check(total == n, "wc-in holds the " + n + " lines: " + end);
            for (TopicPartition tp : in) {
                OffsetAndMetadata o = committed.get(tp);
                check(o != null && o.offset() == end.get(tp),
                        "the group wc committed " + tp + "'s end offset " + end.get(tp) + ": " + o);
            }
        }
        if (!stopped) {
            return;
        }
        List<TopicPartition> written = new ArrayList<>(out);
        written.addAll(partitions(REPARTITION));
        written.addAll(partitions(CHANGELOG));
        config.remove(ConsumerConfig.GROUP_ID_CONFIG);
        Map<TopicPartition, Long> stable;
        Map<TopicPartition, Long> high;
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(config, new StringDeserializer(), new LongDeserializer())) {
            stable = c.endOffsets(written);
        }
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(config, new StringDeserializer(), new LongDeserializer())) {
            high = c.endOffsets(written);
            check(stable.equals(high), "no transaction left open: the last stable offsets are the high watermarks " + high);
            Map<TopicPartition, Long> start = c.beginningOffsets(partitions(REPARTITION));
            check(start.values().stream().allMatch(o -> o > 0), "the app purged " + REPARTITION + ": log start offsets " + start);
        }
    }

    private static Map<String, Long> last(Map<String, List<Long>> counts) {
        Map<String, Long> out = new TreeMap<>();
        counts.forEach((w, seen) -> out.put(w, seen.get(seen.size() - 1)));
        return out;
    }

    private static String firstDifference(List<Long> expected, List<Long> seen) {
        int i = 0;
        while (i < expected.size() && i < seen.size() && expected.get(i).equals(seen.get(i))) {
            i++;
        }
        int from = Math.max(0, i - 3);
        return "differ at update " + i + ": expected " + expected.subList(from, Math.min(expected.size(), i + 4))
                + "..., got " + seen.subList(from, Math.min(seen.size(), i + 4)) + "... (" + seen.size()
                + " updates)";
    }
}
