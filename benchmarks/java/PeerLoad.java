import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The stock Java client as the load generator of benchmarks/peer_bench.py. One JSON line of results on stdout.
 *   PeerLoad send NAMESRV TOPIC THREADS SECONDS BATCH      sync sends of 100-byte bodies (BATCH 1: send(Message),
 *                                                         else send(Collection) of BATCH messages) for SECONDS
 *   PeerLoad load NAMESRV TOPIC COUNT                      COUNT messages in batches of 256, 4 threads
 *                                                         (property a = i % 10, for the SQL92 case)
 *   PeerLoad drain NAMESRV TOPIC GROUP COUNT TIMEOUT [SQL] a push consumer from the first offset until COUNT came
 *   PeerLoad latency NAMESRV TOPIC COUNT INTERVAL_MS       one message every INTERVAL_MS to a consumer whose pulls
 *                                                         are held; from each send's response to its delivery
 *   PeerLoad txn NAMESRV TOPIC COUNT THREADS               COUNT transactional messages (100-byte bodies, a tag,
 *                                                         two properties) by a TransactionMQProducer from THREADS
 *                                                         threads, the local transaction answering COMMIT_MESSAGE
 *                                                         (END_TRANSACTION oneway, as the client sends it); prints
 *                                                         the epoch ms of the first send and of the last END
 * Latencies are measured in this one JVM, on one clock.
 */
public class PeerLoad {
    static final byte[] BODY = new byte[100];

    static {
        Arrays.fill(BODY, (byte) 'x');
    }

    static DefaultMQProducer producer(String namesrv, String group) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(namesrv);
        p.setSendMsgTimeout(10000);
        p.setDefaultTopicQueueNums(8);
        p.start();
        return p;
    }

    static double pct(long[] sorted, double q) {
        if (sorted.length == 0) return 0;
        return sorted[Math.min(sorted.length - 1, (int) (q * sorted.length))] / 1e6;
    }

    static void send(String namesrv, String topic, int threads, double seconds, int batch) throws Exception {
        DefaultMQProducer p = producer(namesrv, "peer-bench-send");
        p.send(new Message(topic, "TagA", BODY));  // the route is known before the clock starts
        long end = System.nanoTime() + (long) (seconds * 1e9);
        AtomicLong sent = new AtomicLong(), failed = new AtomicLong();
        List<long[]> lat = new ArrayList<>();
        List<Thread> ts = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            long[] mine = new long[500_000];
            lat.add(mine);
            Thread th = new Thread(() -> {
                int i = 0;
                while (System.nanoTime() < end) {
                    try {
                        long s = System.nanoTime();
                        SendResult r;
                        if (batch == 1) {
                            r = p.send(new Message(topic, "TagA", BODY));
                        } else {
                            List<Message> ms = new ArrayList<>(batch);
                            for (int k = 0; k < batch; k++) ms.add(new Message(topic, "TagA", BODY));
                            r = p.send(ms);
                        }
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            sent.addAndGet(batch);
                            if (i < mine.length) mine[i++] = System.nanoTime() - s;
                        } else {
                            failed.addAndGet(batch);
                        }
                    } catch (Exception e) {
                        failed.addAndGet(batch);
                    }
                }
                mine[mine.length - 1] = i;  // the count, read back below
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) th.join();
        double took = (System.nanoTime() - t0) / 1e9;
        p.shutdown();
        int total = 0;
        for (long[] l : lat) total += (int) l[l.length - 1];
        long[] all = new long[total];
        int k = 0;
        for (long[] l : lat) {
            int c = (int) l[l.length - 1];
            System.arraycopy(l, 0, all, k, c);
            k += c;
        }
        Arrays.sort(all);
        System.out.printf("{\"messages\": %d, \"failed\": %d, \"seconds\": %.3f, \"msg_per_s\": %.1f, "
                + "\"p50_ms\": %.3f, \"p99_ms\": %.3f}%n", sent.get(), failed.get(), took, sent.get() / took,
                pct(all, 0.5), pct(all, 0.99));
    }

    static void load(String namesrv, String topic, int count) throws Exception {
        DefaultMQProducer p = producer(namesrv, "peer-bench-load");
        AtomicLong next = new AtomicLong(), failed = new AtomicLong();
        long t0 = System.nanoTime();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            Thread th = new Thread(() -> {
                while (true) {
                    long first = next.getAndAdd(256);
                    if (first >= count) return;
                    List<Message> ms = new ArrayList<>();
                    for (long i = first; i < Math.min(count, first + 256); i++) {
                        Message m = new Message(topic, "TagA", BODY);
                        m.putUserProperty("a", Long.toString(i % 10));
                        ms.add(m);
                    }
                    for (int attempt = 0; ; attempt++) {
                        try {
                            if (p.send(ms).getSendStatus() == SendStatus.SEND_OK) break;
                        } catch (Exception e) {
                            if (attempt > 5) {
                                failed.addAndGet(ms.size());
                                break;
                            }
                        }
                    }
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) th.join();
        double took = (System.nanoTime() - t0) / 1e9;
        p.shutdown();
        System.out.printf("{\"messages\": %d, \"failed\": %d, \"seconds\": %.3f, \"msg_per_s\": %.1f}%n",
                count - failed.get(), failed.get(), took, (count - failed.get()) / took);
    }

    static void txn(String namesrv, String topic, int count, int threads) throws Exception {
        TransactionMQProducer p = new TransactionMQProducer("peer-bench-txn");
        p.setNamesrvAddr(namesrv);
        p.setSendMsgTimeout(10000);
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        p.sendMessageInTransaction(new Message(topic + "Warm", "TagA", BODY), null);  // the route, a connection
        AtomicLong next = new AtomicLong(), failed = new AtomicLong();
        long start = System.currentTimeMillis();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                while (true) {
                    long i = next.getAndIncrement();
                    if (i >= count) return;
                    byte[] body = String.format("%100d", i).getBytes(StandardCharsets.UTF_8);
                    Message m = new Message(topic, "Tag" + (i % 10), body);
                    m.putUserProperty("region", i % 2 == 0 ? "eu" : "us");
                    m.putUserProperty("price", Long.toString(i % 1000));
                    try {
                        if (p.sendMessageInTransaction(m, null).getLocalTransactionState()
                                != LocalTransactionState.COMMIT_MESSAGE) {
                            failed.incrementAndGet();
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                    }
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) th.join();
        long end = System.currentTimeMillis();
        p.shutdown();
        System.out.printf("{\"messages\": %d, \"failed\": %d, \"start_ms\": %d, \"end_ms\": %d}%n",
                count - failed.get(), failed.get(), start, end);
    }

    static void drain(String namesrv, String topic, String group, long count, int timeout, String sql)
            throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setConsumeMessageBatchMaxSize(32);
        c.setPullBatchSize(32);
        if (sql == null) {
            c.subscribe(topic, "*");
        } else {
            c.subscribe(topic, MessageSelector.bySql(sql));
        }
        AtomicLong got = new AtomicLong(), first = new AtomicLong(), last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            long n = got.addAndGet(msgs.size());
            last.set(now);
            if (n >= count) done.countDown();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long t0 = System.nanoTime();
        c.start();
        boolean complete = done.await(timeout, TimeUnit.SECONDS);
        double took = (last.get() - t0) / 1e9;
        c.shutdown();
        System.out.printf("{\"messages\": %d, \"complete\": %b, \"seconds\": %.3f, \"msg_per_s\": %.1f}%n",
                got.get(), complete, took, got.get() / Math.max(took, 1e-9));
    }

    static void latency(String namesrv, String topic, int count, int intervalMs) throws Exception {
        DefaultMQProducer p = producer(namesrv, "peer-bench-latency");
        p.send(new Message(topic, "warm", BODY));
        ConcurrentHashMap<String, Long> acked = new ConcurrentHashMap<>(), delivered = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("peer-bench-latency");
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        c.subscribe(topic, "lat");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            for (MessageExt m : msgs) delivered.putIfAbsent(new String(m.getBody(), StandardCharsets.UTF_8), now);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        Thread.sleep(5000);  // rebalanced and its pulls held before the first message
        for (int i = 0; i < count; i++) {
            String id = "m" + i;
            p.send(new Message(topic, "lat", id.getBytes(StandardCharsets.UTF_8)));
            acked.put(id, System.nanoTime());
            Thread.sleep(intervalMs);
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (delivered.size() < count && System.nanoTime() < deadline) Thread.sleep(50);
        c.shutdown();
        p.shutdown();
        List<Long> l = new ArrayList<>();
        for (String id : acked.keySet()) {
            Long d = delivered.get(id);
            if (d != null) l.add(Math.max(0, d - acked.get(id)));
        }
        long[] all = l.stream().mapToLong(Long::longValue).sorted().toArray();
        System.out.printf("{\"messages\": %d, \"delivered\": %d, \"p50_ms\": %.3f, \"p90_ms\": %.3f, "
                + "\"p99_ms\": %.3f}%n", count, all.length, pct(all, 0.5), pct(all, 0.9), pct(all, 0.99));
    }

    public static void main(String[] a) {
        try {
            run(a);
        } catch (Throwable t) {  // a client that failed to start leaves non-daemon threads: exit, do not hang
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String[] a) throws Exception {
        switch (a[0]) {
            case "send":
                send(a[1], a[2], Integer.parseInt(a[3]), Double.parseDouble(a[4]), Integer.parseInt(a[5]));
                break;
            case "load":
                load(a[1], a[2], Integer.parseInt(a[3]));
                break;
            case "drain":
                drain(a[1], a[2], a[3], Long.parseLong(a[4]), Integer.parseInt(a[5]), a.length > 6 ? a[6] : null);
                break;
            case "latency":
                latency(a[1], a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]));
                break;
            case "txn":
                txn(a[1], a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]));
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + a[0]);
        }
    }
}
