import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Stock clients for what a store holds. Usage:
 *   StockStoreClient pull NAMESRV TOPIC[,TOPIC...]: every message of every queue of the topics, from each queue's
 *     min offset to its end (DefaultMQPullConsumer), one JSON line each (StockPushConsumer's fields);
 *   StockStoreClient offsets NAMESRV GROUP TOPIC: the group's offset of each queue as the broker keeps it
 *     ({"queueId", "offset", "min", "max"});
 *   StockStoreClient delayed NAMESRV GROUP: stdin's messages (StockProducer's JSON plus "level") sent with
 *     setDelayTimeLevel(level), one JSON SendResult line each;
 *   StockStoreClient topic NAMESRV BROKER TOPIC QUEUES: create the topic on that one broker.
 */
public class StockStoreClient {
    public static void main(String[] args) throws Exception {
        String mode = args[0], namesrv = args[1];
        if (mode.equals("topic")) {
            DefaultMQAdminExt admin = new DefaultMQAdminExt();
            admin.setNamesrvAddr(namesrv);
            admin.setInstanceName("stock-store-admin-" + ProcessHandle.current().pid());
            admin.start();
            TopicConfig config = new TopicConfig(args[3]);
            config.setReadQueueNums(Integer.parseInt(args[4]));
            config.setWriteQueueNums(Integer.parseInt(args[4]));
            String addr = admin.examineBrokerClusterInfo().getBrokerAddrTable().get(args[2]).selectBrokerAddr();
            admin.createAndUpdateTopicConfig(addr, config);
            System.out.println("{\"created\": \"" + args[3] + "\"}");
            admin.shutdown();
        } else if (mode.equals("delayed")) {
            DefaultMQProducer producer = new DefaultMQProducer(args[2]);
            producer.setNamesrvAddr(namesrv);
            producer.setInstanceName("stock-delayed-" + ProcessHandle.current().pid());
            producer.start();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank()) continue;
                JSONObject m = JSON.parseObject(line);
                Message msg = StockProducer.message(m);
                msg.setDelayTimeLevel(m.getIntValue("level"));
                SendResult r = producer.send(msg);
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("status", r.getSendStatus().toString());
                out.put("msgId", r.getMsgId());
                out.put("queueOffset", r.getQueueOffset());
                System.out.println(JSON.toJSONString(out));
            }
            producer.shutdown();
        } else {
            boolean offsets = mode.equals("offsets");
            DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(offsets ? args[2] : "stock-store-pull");
            consumer.setNamesrvAddr(namesrv);
            consumer.setInstanceName("stock-store-" + ProcessHandle.current().pid());
            consumer.start();
            for (String topic : (offsets ? args[3] : args[2]).split(",")) {
                List<MessageQueue> queues = new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
                queues.sort(null);
                for (MessageQueue mq : queues) {
                    long min = consumer.minOffset(mq), max = consumer.maxOffset(mq);
                    if (offsets) {
                        Map<String, Object> out = new LinkedHashMap<>();
                        out.put("topic", topic);
                        out.put("queueId", mq.getQueueId());
                        out.put("offset", consumer.fetchConsumeOffset(mq, true));
                        out.put("min", min);
                        out.put("max", max);
                        System.out.println(JSON.toJSONString(out));
                        continue;
                    }
                    for (long offset = min; offset < max; ) {
                        PullResult p = consumer.pull(mq, "*", offset, 32, 10000);
                        if (p.getPullStatus() != PullStatus.FOUND) {
                            throw new IllegalStateException(mq + " at " + offset + " of " + max + ": " + p.getPullStatus());
                        }
                        for (MessageExt m : p.getMsgFoundList()) System.out.println(JSON.toJSONString(StockPushConsumer.json(m)));
                        offset = p.getNextBeginOffset();
                    }
                }
            }
            consumer.shutdown();
        }
        System.out.flush();
        System.exit(0);
    }
}
