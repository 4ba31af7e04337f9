import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import com.alibaba.fastjson.JSONArray;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Finding messages with the stock admin client (DefaultMQAdminExt, what mqadmin and the dashboard use), against
 * several name servers in one JVM. Usage: StockQuery, then one JSON object a line on stdin:
 *   {"namesrv", "kind": "send", "message": m}  DefaultMQProducer.send of StockProducer's message form ({"batch": [...]}
 *       for send(Collection)); prints StockProducer's SendResult line. A later query's "send": k takes the msgId
 *       (kind uniq; "item": j picks the j-th id of a batch's) or offsetMsgId (kind offset) of the k-th send
 *   {"namesrv", "kind": "key", "topic", "key", "maxNum", "begin", "end"}  queryMessage (QUERY_MESSAGE 12)
 *   {"namesrv", "kind": "uniq", "topic", "msgId"}  viewMessage(topic, msgId): a client msgId (UNIQ_KEY) is looked up
 *       by queryMessageByUniqKey (QUERY_MESSAGE with _UNIQUE_KEY_QUERY), an offset msgId by VIEW_MESSAGE_BY_ID 33
 *   {"namesrv", "kind": "offset", "msgId"}  viewMessage(offsetMsgId) (VIEW_MESSAGE_BY_ID 33)
 * Each query prints one JSON line {"messages": [{"body", "keys", "msgId", "uniqKey", "commitLogOffset", "queueId",
 * "queueOffset"}]}
 * or {"error": "..."}.
 */
public class StockQuery {
    static Map<String, Object> fields(MessageExt m) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
        out.put("keys", m.getKeys());
        out.put("msgId", m.getMsgId());
        out.put("uniqKey", m.getProperty("UNIQ_KEY"));
        out.put("commitLogOffset", m.getCommitLogOffset());
        out.put("queueId", m.getQueueId());
        out.put("queueOffset", m.getQueueOffset());
        return out;
    }

    public static void main(String[] args) throws Exception {
        Map<String, DefaultMQAdminExt> admins = new HashMap<>();
        Map<String, DefaultMQProducer> producers = new HashMap<>();
        List<SendResult> sent = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank()) continue;
                JSONObject q = JSON.parseObject(line);
                String ns = q.getString("namesrv");
                if (q.getString("kind").equals("send")) {
                    DefaultMQProducer producer = producers.get(ns);
                    if (producer == null) {
                        producer = new DefaultMQProducer("stock-query-producer");
                        producer.setNamesrvAddr(ns);
                        producer.setInstanceName("stock-query-p" + producers.size() + "-" + ProcessHandle.current().pid());
                        producer.setSendMsgTimeout(30000);
                        producer.setRetryTimesWhenSendFailed(0);
                        producer.start();
                        producers.put(ns, producer);
                    }
                    JSONObject m = q.getJSONObject("message");
                    JSONArray batch = m.getJSONArray("batch");
                    SendResult r;
                    if (batch != null) {
                        List<Message> msgs = new ArrayList<>();
                        for (int i = 0; i < batch.size(); i++) msgs.add(StockProducer.message(batch.getJSONObject(i)));
                        r = producer.send(msgs);
                    } else {
                        r = producer.send(StockProducer.message(m));
                    }
                    sent.add(r);
                    System.out.println(JSON.toJSONString(StockProducer.result(r)));
                    continue;
                }
                if (q.containsKey("send")) {
                    SendResult r = sent.get(q.getIntValue("send"));
                    q.put("msgId", q.getString("kind").equals("offset") ? r.getOffsetMsgId()
                        : r.getMsgId().split(",")[q.getIntValue("item")]);
                }
                DefaultMQAdminExt admin = admins.get(ns);
                if (admin == null) {
                    admin = new DefaultMQAdminExt(30000);
                    admin.setMqClientApiTimeout(30000);
                    admin.setNamesrvAddr(ns);
                    admin.setInstanceName("stock-query-" + admins.size() + "-" + ProcessHandle.current().pid());
                    admin.start();
                    admins.put(ns, admin);
                }
                Map<String, Object> out = new LinkedHashMap<>();
                try {
                    List<Object> found = new ArrayList<>();
                    switch (q.getString("kind")) {
                        case "key":
                            for (MessageExt m : admin.queryMessage(q.getString("topic"), q.getString("key"),
                                    q.getIntValue("maxNum"), q.getLongValue("begin"), q.getLongValue("end"))
                                    .getMessageList()) {
                                found.add(fields(m));
                            }
                            break;
                        case "uniq":
                            found.add(fields(admin.viewMessage(q.getString("topic"), q.getString("msgId"))));
                            break;
                        case "offset":  // an offset msgId decodes first (4.9), and 5.x has only this form
                            found.add(fields(admin.viewMessage(q.getString("topic"), q.getString("msgId"))));
                            break;
                        default:
                            throw new IllegalArgumentException("unknown kind " + q.getString("kind"));
                    }
                    out.put("messages", found);
                } catch (Exception e) {
                    out.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
                }
                System.out.println(JSON.toJSONString(out));
            }
        } finally {
            for (DefaultMQAdminExt a : admins.values()) a.shutdown();
            for (DefaultMQProducer p : producers.values()) p.shutdown();
        }
    }
}
