// The partition Apache Kafka's Java producer picks for a record with a key, by the code it
// picks it with (kafka-clients' BuiltInPartitioner: murmur2 of the serialized key, made
// positive, modulo the topic's partition count), for tests/shell/t_partitions_clients.sh
// to hold other clients' default partitioners against. No broker involved.
//
//   java -cp 'target/kafka-4.3.1/libs/*' tests/clients/java/PartitionForKey.java PARTITIONS KEY...
//
// prints "KEY PARTITION" per key (keys as UTF-8, as StringSerializer sends them).
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

public class PartitionForKey {
    public static void main(String[] args) {
        int partitions = Integer.parseInt(args[0]);
        for (int i = 1; i < args.length; i++) {
            byte[] key = args[i].getBytes(StandardCharsets.UTF_8);
            System.out.println(args[i] + " " + BuiltInPartitioner.partitionForKey(key, partitions));
        }
    }
}
