import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The stock DefaultMQPushConsumer as a test peer. Usage: StockPushConsumer NAMESRV GROUP TOPIC SELECTOR EXPRESSION
 * COUNT TIMEOUT_S [first|last]: SELECTOR is "tag" (EXPRESSION a tag expression such as "a || b" or "*") or "sql"
 * (a SQL92 expression). Each message received is printed as one JSON line (every field the client sees); once COUNT
 * messages have arrived, or TIMEOUT_S seconds have passed, the consumer shuts down (which persists the group's
 * offsets at the broker) and prints {"done": n}.
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
        out.put("sysFlag", m.getSysFlag());
        out.put("bodyCRC", m.getBodyCRC());
        out.put("storeSize", m.getStoreSize());
        out.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
        return out;
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], group = args[1], topic = args[2], selector = args[3], expression = args[4];
        int count = Integer.parseInt(args[5]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[6]) * 1000;
        boolean fromLast = args.length > 7 && args[7].equals("last");
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setMqClientApiTimeout(30000);
        consumer.setInstanceName("stock-consumer-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(fromLast ? ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
                                              : ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeThreadMin(1);
        consumer.setConsumeThreadMax(1);
        if (selector.equals("sql")) {
            consumer.subscribe(topic, MessageSelector.bySql(expression));
        } else {
            consumer.subscribe(topic, MessageSelector.byTag(expression));
        }
        AtomicInteger received = new AtomicInteger();
        Object lock = new Object();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            synchronized (lock) {
                for (MessageExt m : msgs) {
                    System.out.println(JSON.toJSONString(json(m)));
                    received.incrementAndGet();
                }
                System.out.flush();
                lock.notifyAll();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        synchronized (lock) {
            while (received.get() < count && System.currentTimeMillis() < deadline) {
                lock.wait(Math.max(1, Math.min(200, deadline - System.currentTimeMillis())));
            }
        }
        // the listener returns after the notify: give the client a moment to move its offsets past the last batch
        Thread.sleep(1000);
        consumer.shutdown();
        System.out.println("{\"done\": " + received.get() + "}");
        System.out.flush();
        System.exit(0);
    }
}
