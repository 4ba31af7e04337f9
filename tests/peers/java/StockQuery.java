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
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Finding messages with the stock admin client (DefaultMQAdminExt, what mqadmin and the dashboard use), against
 * several name servers in one JVM. Usage: StockQuery, then one JSON object a line on stdin:
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
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank()) continue;
                JSONObject q = JSON.parseObject(line);
                String ns = q.getString("namesrv");
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
                        case "offset":
                            found.add(fields(admin.viewMessage(q.getString("msgId"))));
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
        }
    }
}
