import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Stock DefaultMQPushConsumers as test peers, one per group, in one JVM. Usage: StockPushConsumer NAMESRV TOPIC
 * TIMEOUT_S SPEC...; a SPEC is GROUP:SELECTOR:COUNT:FROM:EXPRESSION, SELECTOR "tag" (EXPRESSION a tag expression
 * such as "a || b" or "*") or "sql" (a SQL92 expression), FROM "first" or "last" (where a new group starts).
 * Each message received is printed as one JSON line (every field the client sees, and "group"); once every group
 * has its COUNT messages, or TIMEOUT_S seconds have passed, the groups' offsets are committed at the brokers, the
 * consumers shut down and {"done": {group: n}} is printed.
 * With STOCK_CONSUMER_PACE_MS in the environment each message takes that long to consume, a queue's pulls stop at
 * 8 cached messages, and each line carries "receivedAt" (ms): a consumer still pulling mid-test, whose pauses the
 * receipt times show.
 */
public class StockPushConsumer {
    static String hostText(java.net.SocketAddress a) {
        java.net.InetSocketAddress s = (java.net.InetSocketAddress) a;
        return s.getAddress().getHostAddress() + ":" + s.getPort();
    }

    static Map<String, Object> json(MessageExt m) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("topic", m.getTopic());
        out.put("tags", m.getTags());
        out.put("keys", m.getKeys());
        out.put("properties", m.getProperties());
        out.put("bodyBase64", Base64.getEncoder().encodeToString(m.getBody()));
        out.put("msgId", m.getMsgId());
        // a pushed message is a MessageClientExt: msgId is the producer's UNIQ_KEY, offsetMsgId the store's id
        out.put("offsetMsgId", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId());
        out.put("broker", m.getBrokerName());
        out.put("queueId", m.getQueueId());
        out.put("queueOffset", m.getQueueOffset());
        out.put("commitLogOffset", m.getCommitLogOffset());
        out.put("bornTimestamp", m.getBornTimestamp());
        out.put("storeTimestamp", m.getStoreTimestamp());
        out.put("bornHost", hostText(m.getBornHost()));
        out.put("storeHost", hostText(m.getStoreHost()));
        out.put("reconsumeTimes", m.getReconsumeTimes());
        out.put("flag", m.getFlag());
        out.put("sysFlag", m.getSysFlag());
        out.put("bodyCRC", m.getBodyCRC());
        out.put("storeSize", m.getStoreSize());
        out.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
        return out;
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        String paceText = System.getenv("STOCK_CONSUMER_PACE_MS");
        long pace = paceText == null || paceText.isEmpty() ? 0 : Long.parseLong(paceText);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[2]) * 1000;
        Object lock = new Object();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        Map<String, Integer> wanted = new LinkedHashMap<>();
        Map<String, AtomicInteger> received = new LinkedHashMap<>();
        for (int i = 3; i < args.length; i++) {
            String[] spec = args[i].split(":", 5);
            String group = spec[0];
            wanted.put(group, Integer.parseInt(spec[2]));
            AtomicInteger count = new AtomicInteger();
            received.put(group, count);
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
            consumer.setNamesrvAddr(namesrv);
            consumer.setMqClientApiTimeout(30000);
            consumer.setInstanceName("stock-consumer-" + ProcessHandle.current().pid() + "-" + group);
            consumer.setConsumeFromWhere(spec[3].equals("last") ? ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
                                                                : ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            // a heartbeat a second: a rebalance's new subscription version reaches the brokers at the next
            // heartbeat, and until then each pull of a tag or SQL92 group is refused as "subscription is not
            // latest" (seen: 30 s with the default interval when the heartbeat after a rebalance lost its lock)
            consumer.setHeartbeatBrokerInterval(1000);
            consumer.setConsumeThreadMin(1);
            consumer.setConsumeThreadMax(1);
            if (pace > 0) {
                consumer.setPullBatchSize(8);
                consumer.setPullThresholdForQueue(8);
            }
            consumer.subscribe(topic, spec[1].equals("sql") ? MessageSelector.bySql(spec[4])
                                                            : MessageSelector.byTag(spec[4]));
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                if (pace > 0) {
                    try {
                        Thread.sleep(pace * msgs.size());
                    } catch (InterruptedException e) {
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                }
                synchronized (lock) {
                    for (MessageExt m : msgs) {
                        Map<String, Object> out = json(m);
                        out.put("group", group);
                        if (pace > 0) out.put("receivedAt", System.currentTimeMillis());
                        System.out.println(JSON.toJSONString(out));
                        count.incrementAndGet();
                    }
                    System.out.flush();
                    lock.notifyAll();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumers.add(consumer);
        }
        for (DefaultMQPushConsumer c : consumers) c.start();
        synchronized (lock) {
            while (System.currentTimeMillis() < deadline
                   && wanted.entrySet().stream().anyMatch(e -> received.get(e.getKey()).get() < e.getValue())) {
                lock.wait(Math.max(1, Math.min(200, deadline - System.currentTimeMillis())));
            }
        }
        // a listener returns after its notify: give the clients a moment to move their offsets past the last batch
        Thread.sleep(1000);
        // shutdown's own commit (RemoteBrokerOffsetStore.persistAll) is oneway and may still be unsent when the
        // JVM exits: the offsets are committed first with an answer awaited, so they are at the brokers on exit
        for (DefaultMQPushConsumer c : consumers) {
            OffsetStore offsets = c.getDefaultMQPushConsumerImpl().getOffsetStore();
            for (Map.Entry<MessageQueue, Long> e : offsets.cloneOffsetTable(topic).entrySet()) {
                try {
                    offsets.updateConsumeOffsetToBroker(e.getKey(), e.getValue(), false);
                } catch (Exception ex) {
                    System.err.println("offset of " + e.getKey() + " not committed: " + ex);
                }
            }
        }
        for (DefaultMQPushConsumer c : consumers) c.shutdown();
        Map<String, Object> done = new LinkedHashMap<>();
        for (var e : received.entrySet()) done.put(e.getKey(), e.getValue().get());
        System.out.println("{\"done\": " + JSON.toJSONString(done) + "}");
        System.out.flush();
        System.exit(0);
    }
}
