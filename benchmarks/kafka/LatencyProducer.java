import java.time.Instant;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.errors.TopicExistsException;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** kafka_bench's latency sender (and, with --create, its topic's creator): `rate` messages a second for `seconds` into `topic`, one at a time (no linger),
 *  each body the send time in microseconds since the epoch as decimal text, round robin over the partitions. */
public class LatencyProducer {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("--create")) {  // --create bootstrap topic partitions: the topic, before any reader
            Properties a = new Properties();
            a.put("bootstrap.servers", args[1]);
            try (Admin admin = Admin.create(a)) {
                admin.createTopics(List.of(new NewTopic(args[2], Integer.parseInt(args[3]), (short) 1))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
            return;
        }
        String bootstrap = args[0], topic = args[1];
        double rate = Double.parseDouble(args[2]);
        double seconds = Double.parseDouble(args[3]);
        int partitions = Integer.parseInt(args[4]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("linger.ms", "0");
        p.put("acks", "1");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            long period = (long) (1e9 / rate), start = System.nanoTime();
            long n = (long) (rate * seconds);
            for (long i = 0; i < n; i++) {
                long due = start + i * period;
                long wait = due - System.nanoTime();
                if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                Instant now = Instant.now();
                long micros = now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
                producer.send(new ProducerRecord<>(topic, (int) (i % partitions), null,
                                                   Long.toString(micros).getBytes("US-ASCII"))).get();
            }
        }
        System.out.println("sent");
    }
}
