import com.alibaba.fastjson.JSON;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The stock admin client (DefaultMQAdminExt, what mqadmin runs) as a test peer. Usage: StockAdmin NAMESRV COMMAND
 * ARGS...; each answer is printed as JSON lines.
 *   createTopic CLUSTER TOPIC[,TOPIC...] QUEUES: each topic on every master of the cluster, QUEUES read and write
 *     queues (one JVM for several topics: a JVM's start is most of what a call costs)
 *   consumeStats GROUP: one line per queue {"topic", "broker", "queueId", "brokerOffset", "consumerOffset"}
 *   consumerOffsets GROUP TOPIC: as consumeStats, for one topic (examineConsumeStats(group, topic))
 */
public class StockAdmin {
    public static void main(String[] args) throws Exception {
        // generous timeouts: these machines are slow and shared
        DefaultMQAdminExt admin = new DefaultMQAdminExt(30000);
        admin.setMqClientApiTimeout(30000);
        admin.setNamesrvAddr(args[0]);
        admin.setInstanceName("stock-admin-" + ProcessHandle.current().pid());
        admin.start();
        try {
            switch (args[1]) {
                case "createTopic": {
                    var cluster = admin.examineBrokerClusterInfo();
                    for (String topic : args[3].split(",")) {
                        TopicConfig config = new TopicConfig(topic);
                        config.setReadQueueNums(Integer.parseInt(args[4]));
                        config.setWriteQueueNums(Integer.parseInt(args[4]));
                        for (String broker : cluster.getClusterAddrTable().get(args[2])) {
                            String addr = cluster.getBrokerAddrTable().get(broker).selectBrokerAddr();
                            admin.createAndUpdateTopicConfig(addr, config);
                            Map<String, Object> out = new LinkedHashMap<>();
                            out.put("topic", topic);
                            out.put("broker", broker);
                            out.put("addr", addr);
                            System.out.println(JSON.toJSONString(out));
                        }
                    }
                    break;
                }
                case "consumeStats":
                case "consumerOffsets": {
                    var stats = args.length > 3 ? admin.examineConsumeStats(args[2], args[3])
                                                : admin.examineConsumeStats(args[2]);
                    for (var e : stats.getOffsetTable().entrySet()) {
                        Map<String, Object> out = new LinkedHashMap<>();
                        out.put("topic", e.getKey().getTopic());
                        out.put("broker", e.getKey().getBrokerName());
                        out.put("queueId", e.getKey().getQueueId());
                        out.put("brokerOffset", e.getValue().getBrokerOffset());
                        out.put("consumerOffset", e.getValue().getConsumerOffset());
                        System.out.println(JSON.toJSONString(out));
                    }
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown command " + args[1]);
            }
        } finally {
            admin.shutdown();
        }
    }
}
