package orbitmq.remoting;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The Java side of tests/interop/java/test_java_python_remoting.py: Java producers and push
 * consumers in the same groups as the Python Remoting client (orbitmq.remoting_client), driven
 * line by line over stdin so that one JVM serves a whole test module.
 *
 * <p>Commands (one a line, fields separated by spaces; {@code <id>} names the client):
 * <ul>
 *   <li>{@code produce <id> <ns> <group> <topic> <count> <prefix> [<compressType>]}: sends
 *       {@code <count>} messages (tag {@code Tag<i%3>}, key {@code <prefix><i>}, user property
 *       {@code n=<i>}; message 0 has a 10 KiB body, compressed by the client, with
 *       {@code rocketmq.message.compressType} when given: ZLIB, LZ4 or ZSTD on a 5.x client),
 *       printing {@code <id> SENT <msgId> <key>} each;</li>
 *   <li>{@code consume <id> <ns> <group> <topic> <instanceName>}: starts a CLUSTERING push consumer
 *       from the first offset; every message prints {@code <id> GOT <msgId> <broker> <queue>
 *       <reconsumeTimes> <tags> <keys> <n> <bodyLength> <bodySha256>}; every allocation by
 *       AllocateMessageQueueAveragely prints {@code <id> ALLOC <cid> <cidAll,...> <broker:queue,...>};</li>
 *   <li>{@code consume-orderly <id> <ns> <group> <topic> <instanceName>}: the same with a
 *       MessageListenerOrderly (broker queue locks), 5 ms a message;</li>
 *   <li>{@code stop <id>}: shuts the client down;</li>
 *   <li>{@code quit}.</li>
 * </ul>
 * Every command ends with {@code <id> DONE} (or {@code <id> ERROR <text>}).
 */
public final class MixedGroup {
    private static final Map<String, DefaultMQProducer> PRODUCERS = new ConcurrentHashMap<>();
    private static final Map<String, DefaultMQPushConsumer> CONSUMERS = new ConcurrentHashMap<>();

    private MixedGroup() {
    }

    static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out("READY");
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f[0].equals("quit")) {
                break;
            }
            String id = f.length > 1 ? f[1] : "?";
            try {
                switch (f[0]) {
                    case "produce":
                        produce(id, f[2], f[3], f[4], Integer.parseInt(f[5]), f[6], f.length > 7 ? f[7] : null);
                        break;
                    case "consume":
                        consume(id, f[2], f[3], f[4], f[5], false);
                        break;
                    case "consume-orderly":
                        consume(id, f[2], f[3], f[4], f[5], true);
                        break;
                    case "stop":
                        stop(id);
                        break;
                    default:
                        throw new IllegalArgumentException("unknown command " + f[0]);
                }
                out(id + " DONE");
            } catch (Exception e) {
                out(id + " ERROR " + e.toString().replace('\n', ' '));
            }
        }
        for (String id : new ArrayList<>(CONSUMERS.keySet())) {
            stop(id);
        }
        for (String id : new ArrayList<>(PRODUCERS.keySet())) {
            stop(id);
        }
        System.out.flush();
        // the clients' own non-daemon threads (timers, Netty) must not keep the JVM up
        Runtime.getRuntime().halt(0);
    }

    static void produce(String id, String ns, String group, String topic, int count, String prefix,
                        String compressType) throws Exception {
        // DefaultMQProducer reads rocketmq.message.compressType when it is built (a 4.x one ignores it)
        System.setProperty("rocketmq.message.compressType", compressType == null ? "ZLIB" : compressType);
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(ns);
        producer.setInstanceName(id);
        producer.start();
        PRODUCERS.put(id, producer);
        for (int i = 0; i < count; i++) {
            byte[] body = i == 0 ? big(prefix) : (prefix + i).getBytes(StandardCharsets.UTF_8);
            Message msg = new Message(topic, "Tag" + (i % 3), prefix + i, body);
            msg.putUserProperty("n", Integer.toString(i));
            SendResult result = producer.send(msg);
            out(id + " SENT " + result.getMsgId() + " " + prefix + i);
        }
    }

    static byte[] big(String prefix) {
        StringBuilder sb = new StringBuilder();
        while (sb.length() < 10240) {
            sb.append(prefix).append("-big-");
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    static void consume(String id, String ns, String group, String topic, String instance, boolean orderly)
        throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(ns);
        consumer.setInstanceName(instance);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.setHeartbeatBrokerInterval(2000);
        consumer.subscribe(topic, "*");
        AllocateMessageQueueStrategy averagely = new AllocateMessageQueueAveragely();
        consumer.setAllocateMessageQueueStrategy(new AllocateMessageQueueStrategy() {
            @Override
            public List<MessageQueue> allocate(String consumerGroup, String currentCID, List<MessageQueue> mqAll,
                                               List<String> cidAll) {
                List<MessageQueue> mine = averagely.allocate(consumerGroup, currentCID, mqAll, cidAll);
                if (mqAll.size() > 0 && mqAll.get(0).getTopic().equals(topic)) {
                    List<String> qs = new ArrayList<>();
                    for (MessageQueue mq : mine) {
                        qs.add(mq.getBrokerName() + ":" + mq.getQueueId());
                    }
                    out(id + " ALLOC " + currentCID + " " + String.join(",", cidAll) + " " + String.join(",", qs));
                }
                return mine;
            }

            @Override
            public String getName() {
                return averagely.getName();
            }
        });
        if (orderly) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                for (MessageExt m : msgs) {
                    got(id, m);
                    try {
                        Thread.sleep(5);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                for (MessageExt m : msgs) {
                    got(id, m);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        consumer.start();
        CONSUMERS.put(id, consumer);
    }

    static void got(String id, MessageExt m) {
        out(id + " GOT " + m.getMsgId() + " " + m.getBrokerName() + " " + m.getQueueId() + " "
            + m.getReconsumeTimes() + " " + m.getTags() + " " + m.getKeys() + " " + m.getUserProperty("n")
            + " " + m.getBody().length + " " + sha256(m.getBody()));
    }

    static void stop(String id) {
        DefaultMQPushConsumer consumer = CONSUMERS.remove(id);
        if (consumer != null) {
            consumer.shutdown();
        }
        DefaultMQProducer producer = PRODUCERS.remove(id);
        if (producer != null) {
            producer.shutdown();
        }
    }

    static String sha256(byte[] data) {
        byte[] d;
        try {
            d = MessageDigest.getInstance("SHA-256").digest(data);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        StringBuilder sb = new StringBuilder();
        for (byte b : d) {
            sb.append(String.format("%02x", b));
        }
        return sb.toString();
    }
}
