package orbitmq.remoting;

import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Set;
import java.util.TreeSet;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/** Building clients the same way in every scenario, and printing what they did. */
final class Clients {
    private Clients() {
    }

    /** namesrvAddr, an instance name of its own (so each client is its own MQClientInstance), vip. */
    static void setup(Ctx c, ClientConfig config, String suffix) {
        config.setNamesrvAddr(c.arg("ns"));
        config.setInstanceName(c.id + suffix);
        config.setMqClientApiTimeout(10_000);  // a loaded 2-core machine: more than the 3 s default
        String vip = c.arg("vip", "");
        if (!vip.isEmpty()) {  // else the client's default: on in 4.x, off in 5.x
            config.setVipChannelEnabled(Boolean.parseBoolean(vip));
        }
    }

    static DefaultMQProducer producer(Ctx c, String suffix, RPCHook hook) {
        String group = "P_" + c.id + suffix;
        DefaultMQProducer p = hook == null ? new DefaultMQProducer(group) : new DefaultMQProducer(group, hook);
        setup(c, p, suffix);
        p.setSendMsgTimeout(5000);
        return p;
    }

    static DefaultMQPushConsumer push(Ctx c, String group, String suffix, RPCHook hook) {
        DefaultMQPushConsumer pc = new DefaultMQPushConsumer(group, hook, new AllocateMessageQueueAveragely());
        setup(c, pc, suffix);
        pc.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return pc;
    }

    static DefaultLitePullConsumer litePull(Ctx c, String group, String suffix) {
        DefaultLitePullConsumer lc = new DefaultLitePullConsumer(group);
        setup(c, lc, suffix);
        lc.setPollTimeoutMillis(1000);
        return lc;
    }

    /** One thread consumes: a queue's messages are then handled in offset order. */
    static void singleThread(DefaultMQPushConsumer pc) {
        pc.setConsumeThreadMin(1);
        pc.setConsumeThreadMax(1);
    }

    static Message msg(String topic, String key) {
        return msg(topic, key, key.getBytes(StandardCharsets.UTF_8));
    }

    static Message msg(String topic, String key, byte[] body) {
        Message m = new Message(topic, "TagA", body);
        m.setKeys(key);
        return m;
    }

    static void sent(Ctx c, String mode, String key, SendResult r) {
        c.out("SENT " + mode + " " + key + " " + r.getMsgId() + " " + r.getSendStatus() + " "
            + r.getMessageQueue().getBrokerName() + " " + r.getMessageQueue().getQueueId());
    }

    static void recv(Ctx c, String inst, MessageExt m) {
        c.out("RECV " + inst + " " + m.getKeys() + " " + m.getMsgId() + " " + m.getBrokerName() + " " + m.getQueueId()
            + " " + m.getReconsumeTimes() + " " + m.getQueueOffset());
    }

    static void error(Ctx c, String what, Throwable e) {
        int code = -1;
        if (e instanceof org.apache.rocketmq.client.exception.MQClientException) {
            code = ((org.apache.rocketmq.client.exception.MQClientException) e).getResponseCode();
        } else if (e instanceof org.apache.rocketmq.client.exception.MQBrokerException) {
            code = ((org.apache.rocketmq.client.exception.MQBrokerException) e).getResponseCode();
        }
        String text = String.valueOf(e.getMessage()).replace('\n', ' ');
        c.out("ERROR " + what + " " + code + " " + e.getClass().getName() + " " + text);
    }

    static String queueName(MessageQueue mq) {
        return mq.getBrokerName() + ":" + mq.getQueueId();
    }

    static String queueNames(Set<MessageQueue> mqs) {
        Set<String> names = new TreeSet<>();
        for (MessageQueue mq : mqs) {
            names.add(queueName(mq));
        }
        return String.join(",", names);
    }

    static String sha256(byte[] body) throws Exception {
        StringBuilder hex = new StringBuilder();
        for (byte b : MessageDigest.getInstance("SHA-256").digest(body)) {
            hex.append(String.format("%02x", b));
        }
        return hex.toString();
    }

    /** A private field (the clients' internals differ in getters between 4.9.8 and 5.5.0, not in fields). */
    static Object field(Object target, String name) throws Exception {
        for (Class<?> k = target.getClass(); k != null; k = k.getSuperclass()) {
            try {
                Field f = k.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            }
        }
        throw new NoSuchFieldException(name);
    }

    /** MessageModel moved from common.protocol.heartbeat (4.x) to remoting.protocol.heartbeat (5.x). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void broadcasting(DefaultMQPushConsumer pc) throws Exception {
        Class<?> model;
        try {
            model = Class.forName("org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel");
        } catch (ClassNotFoundException e) {
            model = Class.forName("org.apache.rocketmq.common.protocol.heartbeat.MessageModel");
        }
        Object value = Enum.valueOf((Class<Enum>) model, "BROADCASTING");
        pc.getClass().getMethod("setMessageModel", model).invoke(pc, value);
    }
}
