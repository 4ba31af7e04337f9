import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The stock DefaultMQProducer as a test peer. Usage: StockProducer NAMESRV GROUP, then one JSON object a line on
 * stdin: a message {"topic", "tags", "keys", "props": {...}, "body" (UTF-8 text) or "bodyBase64", "queue": optional
 * {"broker", "id"}} is sent with send(Message); {"batch": [messages...]} with send(Collection<Message>).
 * Each send prints one JSON line: {"status", "msgId", "offsetMsgId", "broker", "queueId", "queueOffset"}; a failed
 * send prints {"error": "..."} and the program goes on.
 */
public class StockProducer {
    static Message message(JSONObject m) {
        Message msg = new Message();
        msg.setTopic(m.getString("topic"));
        if (m.containsKey("tags")) msg.setTags(m.getString("tags"));
        if (m.containsKey("keys")) msg.setKeys(m.getString("keys"));
        JSONObject props = m.getJSONObject("props");
        if (props != null) {
            for (String k : props.keySet()) msg.putUserProperty(k, props.getString(k));
        }
        if (m.containsKey("bodyBase64")) {
            msg.setBody(Base64.getDecoder().decode(m.getString("bodyBase64")));
        } else {
            msg.setBody(m.getString("body").getBytes(StandardCharsets.UTF_8));
        }
        return msg;
    }

    static Map<String, Object> result(SendResult r) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("status", r.getSendStatus().name());
        out.put("msgId", r.getMsgId());
        out.put("offsetMsgId", r.getOffsetMsgId());
        out.put("broker", r.getMessageQueue().getBrokerName());
        out.put("queueId", r.getMessageQueue().getQueueId());
        out.put("queueOffset", r.getQueueOffset());
        return out;
    }

    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args[1]);
        producer.setNamesrvAddr(args[0]);
        producer.setInstanceName("stock-producer-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(30000);
        producer.setMqClientApiTimeout(30000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                JSONObject req = JSON.parseObject(line);
                try {
                    SendResult r;
                    JSONArray batch = req.getJSONArray("batch");
                    if (batch != null) {
                        List<Message> msgs = new ArrayList<>();
                        for (int i = 0; i < batch.size(); i++) msgs.add(message(batch.getJSONObject(i)));
                        r = producer.send(msgs);
                    } else {
                        JSONObject q = req.getJSONObject("queue");
                        Message msg = message(req);
                        r = q == null ? producer.send(msg)
                            : producer.send(msg, new MessageQueue(msg.getTopic(), q.getString("broker"), q.getIntValue("id")));
                    }
                    System.out.println(JSON.toJSONString(result(r)));
                } catch (Exception e) {
                    Map<String, Object> err = new LinkedHashMap<>();
                    err.put("error", e.toString());
                    System.out.println(JSON.toJSONString(err));
                }
                System.out.flush();
            }
        } finally {
            producer.shutdown();
        }
    }
}
