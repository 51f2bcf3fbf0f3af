// Kafka's Java client (kafka-clients 4.3.1) holding a transaction open against kpfs, for
// tests/shell/t_transactions_view.sh to look at while it is open:
//   KpfsTxnHold BOOTSTRAP TRANSACTIONAL_ID GROUP TOPIC...
// sends a record to partition 0 of each TOPIC and commits offset 0 of the first for GROUP
// in the transaction (sendOffsetsToTransaction: __consumer_offsets joins it), prints
// "open", then waits for a line on stdin: "commit" commits, anything else aborts. Prints
// "committed" or "aborted" and exits 0.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KpfsTxnHold {
    private KpfsTxnHold() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            throw new IllegalArgumentException("usage: KpfsTxnHold BOOTSTRAP TRANSACTIONAL_ID GROUP TOPIC...");
        }
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[1]);
        Map<String, Object> consumerConfig = new HashMap<>();
        consumerConfig.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        consumerConfig.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        try (KafkaProducer<String, String> p =
                        new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
                // Never subscribed: its group metadata is a client's outside group
                // management (generation -1, no member id).
                KafkaConsumer<String, String> c =
                        new KafkaConsumer<>(consumerConfig, new StringDeserializer(), new StringDeserializer())) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 3; i < args.length; i++) {
                p.send(new ProducerRecord<>(args[i], 0, null, "held-" + args[i]));
            }
            p.flush();
            p.sendOffsetsToTransaction(Map.of(new TopicPartition(args[3], 0), new OffsetAndMetadata(0)),
                    c.groupMetadata());
            System.out.println("open");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line = in.readLine();
            if ("commit".equals(line)) {
                p.commitTransaction();
                System.out.println("committed");
            } else {
                p.abortTransaction();
                System.out.println("aborted");
            }
        }
    }
}
