package orbitmq.remoting;

import static orbitmq.remoting.Clients.error;
import static orbitmq.remoting.Clients.msg;
import static orbitmq.remoting.Clients.recv;
import static orbitmq.remoting.Clients.sent;

import java.nio.charset.StandardCharsets;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Date;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

/** The scenarios; each prints what happened, the test decides whether that is right. */
final class Scenarios {
    private static final long WAIT_MS = 45_000;

    private Scenarios() {
    }

    interface Body {
        void run(Ctx c) throws Exception;
    }

    static void run(String name, Ctx c) {
        Map<String, Body> table = Map.ofEntries(
            Map.entry("send", Scenarios::send), Map.entry("bigbody", Scenarios::bigBody),
            Map.entry("orderly", Scenarios::orderly), Map.entry("from", Scenarios::consumeFrom),
            Map.entry("share", Scenarios::share), Map.entry("broadcast", Scenarios::broadcast),
            Map.entry("retry", Scenarios::retry), Map.entry("litepull", Scenarios::litePull),
            Map.entry("tx", Scenarios::transaction), Map.entry("reqreply", Scenarios::requestReply),
            Map.entry("trace", Scenarios::trace), Map.entry("sql", Scenarios::sql),
            Map.entry("acl", Scenarios::acl), Map.entry("failover", Scenarios::failover),
            Map.entry("bad", Scenarios::badInput));
        try {
            table.get(name).run(c);
            c.out("OK");
        } catch (Throwable e) {
            error(c, "scenario", e);
            synchronized (System.err) {
                System.err.println("scenario " + c.id + " failed:");
                e.printStackTrace();
            }
            c.out("FAIL");
        }
    }

    /** Pushes every message of {@code topic} to a concurrently consuming listener that records it. */
    static DefaultMQPushConsumer recorder(Ctx c, String group, String topic, String inst, Set<String> keys,
                                          RPCHook hook) throws Exception {
        DefaultMQPushConsumer pc = Clients.push(c, group, "-" + inst, hook);
        pc.subscribe(topic, "*");
        return listen(c, pc, inst, keys);
    }

    /** A concurrently consuming listener that prints and records every message. */
    static DefaultMQPushConsumer listen(Ctx c, DefaultMQPushConsumer pc, String inst, Set<String> keys) {
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                recv(c, inst, m);
                keys.add(m.getKeys());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return pc;
    }

    /** DefaultMQProducer: sync, async, oneway and batch sends, all pushed to one consumer. */
    static void send(Ctx c) throws Exception {
        String topic = c.arg("topic");
        Set<String> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer pc = recorder(c, c.arg("group"), topic, "c", got, null);
        pc.start();
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        int n = c.num("n", 4);
        for (int i = 0; i < n; i++) {
            sent(c, "sync", "sync-" + i, p.send(msg(topic, "sync-" + i)));
        }
        CountDownLatch acks = new CountDownLatch(n);
        for (int i = 0; i < n; i++) {
            String key = "async-" + i;
            p.send(msg(topic, key), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    sent(c, "async", key, r);
                    acks.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    error(c, "async " + key, e);
                    acks.countDown();
                }
            });
        }
        if (!acks.await(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("async sends not answered");
        }
        for (int i = 0; i < n; i++) {
            Message m = msg(topic, "oneway-" + i);
            p.sendOneway(m);
            c.out("SENT oneway oneway-" + i + " " + MessageClientIDSetter.getUniqID(m));
        }
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            batch.add(msg(topic, "batch-" + i));
        }
        SendResult r = p.send(batch);
        String[] ids = r.getMsgId().split(",");
        for (int i = 0; i < n; i++) {
            c.out("SENT batch batch-" + i + " " + ids[i] + " " + r.getSendStatus() + " "
                + r.getMessageQueue().getBrokerName() + " " + r.getMessageQueue().getQueueId());
        }
        Ctx.await(() -> got.size() >= 4 * n, WAIT_MS, "every message consumed");
        p.shutdown();
        pc.shutdown();
    }

    /** A body over compressMsgBodyOverHowmuch (4 KiB): the client compresses it, consumers get it back. */
    static void bigBody(Ctx c) throws Exception {
        String topic = c.arg("topic");
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < c.num("lines", 800); i++) {
            text.append(String.format("line %04d of a body the client compresses%n", i));
        }
        byte[] body = text.toString().getBytes(StandardCharsets.UTF_8);
        Set<String> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer pc = Clients.push(c, c.arg("group"), "-c", null);
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                try {
                    c.out("BODY " + m.getKeys() + " " + m.getBody().length + " " + Clients.sha256(m.getBody())
                        + " " + (m.getSysFlag() & 0x1));
                } catch (Exception e) {
                    error(c, "digest", e);
                }
                got.add(m.getKeys());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        SendResult r = p.send(msg(topic, "big-0", body));
        sent(c, "sync", "big-0", r);
        c.out("SENTBODY big-0 " + body.length + " " + Clients.sha256(body));
        Ctx.await(() -> got.contains("big-0"), WAIT_MS, "the big message");
        p.shutdown();
        pc.shutdown();
    }

    /** MessageQueueSelector sends, MessageListenerOrderly consumes; the test checks the queue locks. */
    static void orderly(Ctx c) throws Exception {
        String topic = c.arg("topic");
        int orders = c.num("orders", 3);
        int per = c.num("per", 10);
        Set<String> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer pc = Clients.push(c, c.arg("group"), "-c", null);
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            for (MessageExt m : msgs) {
                recv(c, "c", m);
                got.add(m.getKeys());
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        pc.start();
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        for (int seq = 0; seq < per; seq++) {
            for (int order = 0; order < orders; order++) {
                String key = "order" + order + "-" + seq;
                SendResult r = p.send(msg(topic, key),
                    (mqs, message, arg) -> mqs.get((Integer) arg % mqs.size()), order);
                sent(c, "orderly", key, r);
            }
        }
        Ctx.await(() -> got.size() >= orders * per, WAIT_MS, "every ordered message");
        c.barrier("locked");  // the test tries to lock the queues as another client: refused
        pc.shutdown();  // unlocks its queues (ConsumeMessageOrderlyService#shutdown)
        c.barrier("unlocked");  // now another client gets them
        p.shutdown();
    }

    /** CONSUME_FROM_FIRST_OFFSET / LAST_OFFSET / TIMESTAMP for three new groups of one topic. */
    static void consumeFrom(Ctx c) throws Exception {
        String topic = c.arg("topic");
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        for (int i = 0; i < 4; i++) {
            sent(c, "sync", "pre-" + i, p.send(msg(topic, "pre-" + i)));
        }
        // consumeTimestamp has a resolution of one second: a whole second after the last "pre".
        long stamp = (System.currentTimeMillis() / 1000 + 1) * 1000;
        Thread.sleep(stamp + 1000 - System.currentTimeMillis());
        for (int i = 0; i < 4; i++) {
            sent(c, "sync", "post-" + i, p.send(msg(topic, "post-" + i)));
        }
        List<MessageQueue> mqs = new ArrayList<>(p.fetchPublishMessageQueues(topic));
        for (MessageQueue mq : mqs) {  // SEARCH_OFFSET_BY_TIMESTAMP: where the "post" messages start
            c.out("SEARCH " + Clients.queueName(mq) + " " + p.searchOffset(mq, stamp));
        }
        for (MessageQueue mq : mqs) {
            String key = "tail-" + Clients.queueName(mq);
            sent(c, "tail", key, p.send(msg(topic, key), mq));
        }
        String[][] modes = {{"first", "CONSUME_FROM_FIRST_OFFSET"}, {"last", "CONSUME_FROM_LAST_OFFSET"},
            {"timestamp", "CONSUME_FROM_TIMESTAMP"}};
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        List<Set<String>> gots = new ArrayList<>();
        for (String[] mode : modes) {
            Set<String> got = ConcurrentHashMap.newKeySet();
            DefaultMQPushConsumer pc = recorder(c, c.arg("group_" + mode[0]), topic, mode[0], got, null);
            pc.setConsumeFromWhere(ConsumeFromWhere.valueOf(mode[1]));
            pc.setConsumeTimestamp(new SimpleDateFormat("yyyyMMddHHmmss").format(new Date(stamp)));
            Clients.singleThread(pc);  // a queue's tail comes last: all before it was seen
            pc.start();
            consumers.add(pc);
            gots.add(got);
        }
        for (Set<String> got : gots) {
            Ctx.await(() -> mqs.stream().allMatch(mq -> got.contains("tail-" + Clients.queueName(mq))), WAIT_MS,
                "every queue's tail");
        }
        for (DefaultMQPushConsumer pc : consumers) {
            pc.shutdown();
        }
        p.shutdown();
    }

    /** The queues of {@code topic} the instance holds now (not its group's retry topic). */
    @SuppressWarnings("unchecked")
    static Set<MessageQueue> assigned(DefaultMQPushConsumer pc, String topic) throws Exception {
        Object rebalance = Clients.field(pc.getDefaultMQPushConsumerImpl(), "rebalanceImpl");
        Set<MessageQueue> mine = new HashSet<>();
        for (MessageQueue mq : ((Map<MessageQueue, ?>) Clients.field(rebalance, "processQueueTable")).keySet()) {
            if (mq.getTopic().equals(topic)) {
                mine.add(mq);
            }
        }
        return mine;
    }

    /** Waits until the running instances hold disjoint queue sets covering every queue; prints them. */
    static void awaitShare(Ctx c, Map<String, DefaultMQPushConsumer> running, String topic,
                           Collection<MessageQueue> all) throws Exception {
        Ctx.await(() -> {
            try {
                Set<MessageQueue> union = new HashSet<>();
                int total = 0;
                for (DefaultMQPushConsumer pc : running.values()) {
                    Set<MessageQueue> mine = assigned(pc, topic);
                    if (mine.isEmpty()) {
                        return false;
                    }
                    union.addAll(mine);
                    total += mine.size();
                }
                return total == all.size() && union.equals(new HashSet<>(all));
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, WAIT_MS, "the instances to share the queues");
        for (Map.Entry<String, DefaultMQPushConsumer> e : running.entrySet()) {
            c.out("ASSIGN " + e.getKey() + " " + Clients.queueNames(assigned(e.getValue(), topic)));
        }
    }

    /** Three instances of one group share the queues; one stops and its queues move to the others. */
    static void share(Ctx c) throws Exception {
        String topic = c.arg("topic");
        String group = c.arg("group");
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        List<MessageQueue> mqs = new ArrayList<>(p.fetchPublishMessageQueues(topic));
        Map<String, DefaultMQPushConsumer> running = new java.util.TreeMap<>();
        Set<String> got = ConcurrentHashMap.newKeySet();
        for (String inst : new String[] {"i1", "i2", "i3"}) {
            DefaultMQPushConsumer pc = recorder(c, group, topic, inst, got, null);
            pc.start();
            running.put(inst, pc);
        }
        for (int round = 1; round <= 2; round++) {
            awaitShare(c, running, topic, mqs);
            c.out("ROUND " + round);
            List<String> keys = new ArrayList<>();
            for (MessageQueue mq : mqs) {
                for (int j = 0; j < 2; j++) {
                    String key = "r" + round + "-" + Clients.queueName(mq) + "-" + j;
                    sent(c, "round" + round, key, p.send(msg(topic, key), mq));
                    keys.add(key);
                }
            }
            Ctx.await(() -> got.containsAll(keys), WAIT_MS, "round " + round);
            if (round == 1) {
                running.remove("i3").shutdown();
                c.out("STOPPED i3");
            }
        }
        for (DefaultMQPushConsumer pc : running.values()) {
            pc.shutdown();
        }
        p.shutdown();
    }

    /** BROADCASTING: every instance gets every message. */
    static void broadcast(Ctx c) throws Exception {
        String topic = c.arg("topic");
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        List<Set<String>> gots = new ArrayList<>();
        for (String inst : new String[] {"b1", "b2"}) {
            Set<String> got = ConcurrentHashMap.newKeySet();
            DefaultMQPushConsumer pc = recorder(c, c.arg("group"), topic, inst, got, null);
            Clients.broadcasting(pc);
            pc.start();
            consumers.add(pc);
            gots.add(got);
        }
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        int n = c.num("n", 6);
        for (int i = 0; i < n; i++) {
            sent(c, "sync", "bc-" + i, p.send(msg(topic, "bc-" + i)));
        }
        for (Set<String> got : gots) {
            Ctx.await(() -> got.size() >= n, WAIT_MS, "every message in every instance");
        }
        for (DefaultMQPushConsumer pc : consumers) {
            pc.shutdown();
        }
        p.shutdown();
    }

    /** RECONSUME_LATER each time: retries through the delay levels, then the DLQ after maxReconsumeTimes. */
    static void retry(Ctx c) throws Exception {
        String topic = c.arg("topic");
        int max = c.num("max", 2);
        Map<String, Integer> last = new ConcurrentHashMap<>();
        DefaultMQPushConsumer pc = Clients.push(c, c.arg("group"), "-c", null);
        pc.setMaxReconsumeTimes(max);
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                recv(c, "c", m);
                c.out("RETRY " + m.getKeys() + " " + m.getReconsumeTimes() + " " + m.getProperty("RETRY_TOPIC"));
                last.put(m.getKeys(), m.getReconsumeTimes());
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        pc.start();
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        for (int i = 0; i < 2; i++) {
            sent(c, "sync", "retry-" + i, p.send(msg(topic, "retry-" + i)));
        }
        Ctx.await(() -> last.size() == 2 && last.values().stream().allMatch(t -> t >= max), WAIT_MS,
            "the last delivery of each message");
        // Shutting down while the last send-back is in flight makes the client re-send it as a
        // message to the retry topic (DefaultMQPushConsumerImpl#sendMessageBack's fallback), a
        // second DLQ copy: the test waits until the broker shows both in the DLQ.
        c.barrier("dlq");
        pc.shutdown();
        p.shutdown();
    }

    @SuppressWarnings("unchecked")
    static Set<MessageQueue> assigned(DefaultLitePullConsumer lc) throws Exception {
        Object impl = Clients.field(lc, "defaultLitePullConsumerImpl");
        Object rebalance = Clients.field(impl, "rebalanceImpl");
        return new HashSet<>(((Map<MessageQueue, ?>) Clients.field(rebalance, "processQueueTable")).keySet());
    }

    /** DefaultLitePullConsumer: two subscribed instances share the queues; one assigns, seeks, commits. */
    static void litePull(Ctx c) throws Exception {
        String topic = c.arg("topic");
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        List<MessageQueue> mqs = new ArrayList<>(p.fetchPublishMessageQueues(topic));
        List<DefaultLitePullConsumer> subscribed = new ArrayList<>();
        for (String inst : new String[] {"l1", "l2"}) {
            DefaultLitePullConsumer lc = Clients.litePull(c, c.arg("group"), "-" + inst);
            // LAST_OFFSET (the default) starts a queue at its end when its pull task first runs,
            // which may be after this scenario's first sends: FIRST_OFFSET sees them all.
            lc.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            lc.subscribe(topic, "*");
            lc.start();
            subscribed.add(lc);
        }
        // Shared, and settled: unchanged for two rebalance rounds (the JVM rebalances every second),
        // so that no instance is still between taking a queue off its table and dropping its pulls.
        List<Set<MessageQueue>> last = new ArrayList<>();
        long[] since = {0};
        Ctx.await(() -> {
            try {
                Set<MessageQueue> a = assigned(subscribed.get(0));
                Set<MessageQueue> b = assigned(subscribed.get(1));
                Set<MessageQueue> union = new HashSet<>(a);
                union.addAll(b);
                boolean shared = !a.isEmpty() && !b.isEmpty() && a.size() + b.size() == mqs.size()
                    && union.equals(new HashSet<>(mqs));
                if (!shared || !List.of(a, b).equals(last)) {
                    last.clear();
                    last.addAll(List.of(a, b));
                    since[0] = System.currentTimeMillis();
                    return false;
                }
                return System.currentTimeMillis() - since[0] >= 2_000;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, WAIT_MS, "the lite pull instances to share the queues");
        c.out("ASSIGN l1 " + Clients.queueNames(assigned(subscribed.get(0))));
        c.out("ASSIGN l2 " + Clients.queueNames(assigned(subscribed.get(1))));
        Set<String> keys = new HashSet<>();
        for (MessageQueue mq : mqs) {
            for (int j = 0; j < 2; j++) {
                String key = "lp-" + Clients.queueName(mq) + "-" + j;
                sent(c, "sync", key, p.send(msg(topic, key), mq));
                keys.add(key);
            }
        }
        Set<String> got = new HashSet<>();
        pollUntil(c, subscribed, () -> got.containsAll(keys), got, "every message by the subscribed instances");
        for (DefaultLitePullConsumer lc : subscribed) {
            lc.shutdown();
        }
        // assign + seek + commitSync, outside the group's rebalance
        DefaultLitePullConsumer lc = Clients.litePull(c, c.arg("group_assign"), "-a");
        lc.setAutoCommit(false);
        lc.start();
        Collection<MessageQueue> queues = lc.fetchMessageQueues(topic);
        lc.assign(queues);
        Set<String> assignedGot = new HashSet<>();
        pollUntil(c, List.of(lc), () -> assignedGot.containsAll(keys), assignedGot, "every message, assigned");
        MessageQueue first = mqs.get(0);
        lc.seek(first, 1);  // back to the second message of the first queue: it comes again, alone
        c.out("SEEK " + Clients.queueName(first) + " 1");
        Set<String> again = new HashSet<>();
        String second = "lp-" + Clients.queueName(first) + "-1";
        pollUntil(c, List.of(lc), () -> again.contains(second), again, "the message sought");
        lc.commitSync();
        c.out("COMMITTED");
        lc.shutdown();  // persists the committed offsets to the brokers
        p.shutdown();
    }

    interface Done {
        boolean done();
    }

    /** Polls the consumers (printing RECV l1/l2/a...) until {@code done}; fails after WAIT_MS. */
    static void pollUntil(Ctx c, List<DefaultLitePullConsumer> consumers, Done done, Set<String> got, String what)
        throws Exception {
        long end = System.currentTimeMillis() + WAIT_MS;
        while (!done.done()) {
            if (System.currentTimeMillis() > end) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            for (int i = 0; i < consumers.size(); i++) {
                for (MessageExt m : consumers.get(i).poll(200)) {
                    recv(c, consumers.size() == 1 ? "a" : "l" + (i + 1), m);
                    got.add(m.getKeys());
                }
            }
        }
    }

    /** TransactionMQProducer: commit, rollback, and two UNKNOW answered by check-backs. */
    static void transaction(Ctx c) throws Exception {
        String topic = c.arg("topic");
        Set<String> checked = ConcurrentHashMap.newKeySet();
        TransactionMQProducer p = new TransactionMQProducer("P_" + c.id + "-tx");
        Clients.setup(c, p, "-p");
        // The broker checks a producer group it knows from heartbeats; 4.x heartbeats only every
        // heartbeatBrokerInterval (30 s), 5.x also when a route changes: beat before the checks run out.
        p.setHeartbeatBrokerInterval(1000);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                switch (m.getKeys()) {
                    case "tx-commit":
                        return LocalTransactionState.COMMIT_MESSAGE;
                    case "tx-rollback":
                        return LocalTransactionState.ROLLBACK_MESSAGE;
                    default:
                        return LocalTransactionState.UNKNOW;
                }
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                c.out("CHECK " + m.getKeys() + " " + m.getTransactionId());
                checked.add(m.getKeys());
                return m.getKeys().equals("tx-unknown-commit") ? LocalTransactionState.COMMIT_MESSAGE
                    : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        p.start();
        Set<String> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer pc = recorder(c, c.arg("group"), topic, "c", got, null);
        pc.start();
        for (String key : new String[] {"tx-commit", "tx-rollback", "tx-unknown-commit", "tx-unknown-rollback"}) {
            SendResult r = p.sendMessageInTransaction(msg(topic, key), null);
            sent(c, "tx", key, r);
        }
        Ctx.await(() -> checked.size() >= 2 && got.contains("tx-commit") && got.contains("tx-unknown-commit"),
            WAIT_MS, "check-backs and committed messages");
        pc.shutdown();
        p.shutdown();
    }

    /** DefaultMQProducer#request: a consumer answers with MessageUtil#createReplyMessage. */
    static void requestReply(Ctx c) throws Exception {
        String topic = c.arg("topic");
        DefaultMQProducer replier = Clients.producer(c, "-r", null);
        replier.start();
        DefaultMQPushConsumer pc = Clients.push(c, c.arg("group"), "-c", null);
        // The client's first rebalance raises its subscription's version and sends a heartbeat only
        // if no other heartbeat holds MQClientInstance's lockHeartbeat (tryLock); when the scheduled
        // one does, the broker keeps the old version and answers SUBSCRIPTION_NOT_LATEST to every
        // pull until the next heartbeat, 30 s later by default: longer than a request's 10 s.
        pc.setHeartbeatBrokerInterval(1000);
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(m,
                        ("reply:" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8));
                    SendResult r = replier.send(reply);
                    c.out("REPLIED " + m.getKeys() + " " + r.getSendStatus() + " " + reply.getTopic());
                } catch (Exception e) {
                    error(c, "reply " + m.getKeys(), e);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        for (int i = 0; i < 3; i++) {
            String key = "req-" + i;
            Message reply = p.request(msg(topic, key), 10_000);
            c.out("REPLY " + key + " " + new String(reply.getBody(), StandardCharsets.UTF_8));
        }
        p.shutdown();
        pc.shutdown();
        replier.shutdown();
    }

    /** enableMsgTrace on a producer and a consumer; the test queries the trace by message id. */
    static void trace(Ctx c) throws Exception {
        String topic = c.arg("topic");
        Set<String> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer pc = new DefaultMQPushConsumer(c.arg("group"), true, null);
        Clients.setup(c, pc, "-c");
        pc.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pc.subscribe(topic, "*");
        listen(c, pc, "c", got).start();
        DefaultMQProducer p = new DefaultMQProducer("P_" + c.id + "-t", true, null);
        Clients.setup(c, p, "-p");
        p.start();
        SendResult traced = p.send(msg(topic, "traced-0"));
        sent(c, "sync", "traced-0", traced);
        Ctx.await(() -> got.contains("traced-0"), WAIT_MS, "the traced message");
        // The consumer's records (SubBefore, SubAfter) leave its AsyncTraceDispatcher in the
        // background; a shutdown while they are in flight can drop them, so the test waits at a
        // barrier until the broker's trace topic shows them.
        c.barrier("traced-" + traced.getMsgId());
        pc.shutdown();
        p.shutdown();
    }

    /** MessageSelector.bySql: only matching messages are pushed. */
    static void sql(Ctx c) throws Exception {
        String topic = c.arg("topic");
        Set<String> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer pc = Clients.push(c, c.arg("group"), "-c", null);
        Clients.singleThread(pc);
        pc.subscribe(topic, MessageSelector.bySql("n > 5 AND color = 'red'"));
        listen(c, pc, "c", got).start();
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.start();
        for (int i = 0; i < 10; i++) {
            Message m = msg(topic, "sql-" + i);
            m.putUserProperty("n", String.valueOf(i));
            m.putUserProperty("color", i % 2 == 0 ? "red" : "blue");
            sent(c, "sync", "sql-" + i, p.send(m));
        }
        List<MessageQueue> mqs = new ArrayList<>(p.fetchPublishMessageQueues(topic));
        for (MessageQueue mq : mqs) {
            Message m = msg(topic, "tail-" + Clients.queueName(mq));
            m.putUserProperty("n", "100");
            m.putUserProperty("color", "red");
            sent(c, "tail", m.getKeys(), p.send(m, mq));
        }
        Ctx.await(() -> mqs.stream().allMatch(mq -> got.contains("tail-" + Clients.queueName(mq))), WAIT_MS,
            "every queue's tail");
        pc.shutdown();
        p.shutdown();
    }

    /** ACL 2.0 with AclClientRPCHook: a user allowed to, one with a wrong secret, one without Pub. */
    static void acl(Ctx c) throws Exception {
        String topic = c.arg("topic");
        RPCHook good = new AclClientRPCHook(new SessionCredentials(c.arg("ak"), c.arg("sk")));
        Set<String> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer pc = recorder(c, c.arg("group"), topic, "c", got, good);
        pc.start();
        DefaultMQProducer p = Clients.producer(c, "-p", good);
        p.start();
        for (int i = 0; i < 3; i++) {
            sent(c, "sync", "acl-" + i, p.send(msg(topic, "acl-" + i)));
        }
        String[][] others = {{"badsecret", c.arg("ak"), c.arg("sk") + "x"}, {"nopub", c.arg("reader_ak"),
            c.arg("reader_sk")}};
        for (String[] other : others) {
            DefaultMQProducer q = Clients.producer(c, "-" + other[0],
                new AclClientRPCHook(new SessionCredentials(other[1], other[2])));
            q.setRetryTimesWhenSendFailed(0);
            q.start();
            try {
                sent(c, other[0], other[0] + "-0", q.send(msg(topic, other[0] + "-0")));
            } catch (Exception e) {
                error(c, other[0], e);
            }
            q.shutdown();
        }
        Ctx.await(() -> got.size() >= 3, WAIT_MS, "the allowed user's messages");
        pc.shutdown();
        p.shutdown();
    }

    /** One broker set goes down: sends retry to the other (with and without sendLatencyFaultEnable). */
    static void failover(Ctx c) throws Exception {
        String topic = c.arg("topic");
        List<DefaultMQProducer> producers = new ArrayList<>();
        for (boolean latency : new boolean[] {true, false}) {
            DefaultMQProducer p = Clients.producer(c, latency ? "-latency" : "-plain", null);
            p.setSendLatencyFaultEnable(latency);
            p.setSendMsgTimeout(3000);
            p.start();
            producers.add(p);
            for (int i = 0; i < 4; i++) {  // both broker sets up: the route and connections are warm
                String key = (latency ? "latency" : "plain") + "-up-" + i;
                sent(c, latency ? "latency" : "plain", key, p.send(msg(topic, key)));
            }
        }
        c.barrier("down");  // the test stops one broker set now
        for (int k = 0; k < producers.size(); k++) {
            String mode = k == 0 ? "latency" : "plain";
            for (int i = 0; i < 8; i++) {
                String key = mode + "-down-" + i;
                try {
                    sent(c, mode + "-down", key, producers.get(k).send(msg(topic, key)));
                } catch (Exception e) {
                    error(c, mode + "-down " + key, e);
                }
            }
        }
        for (DefaultMQProducer p : producers) {
            p.shutdown();
        }
    }

    /** What the client and the brokers answer at the edges; each case prints SENT or ERROR. */
    static void badInput(Ctx c) throws Exception {
        String topic = c.arg("topic");
        DefaultMQProducer p = Clients.producer(c, "-p", null);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        byte[] big = new byte[4 * 1024 * 1024 + 1];
        new java.util.Random(7).nextBytes(big);
        try {  // the client's own check (Validators#checkMessage)
            sent(c, "body-client", "big", p.send(msg(topic, "big", big)));
        } catch (Exception e) {
            error(c, "body-client", e);
        }
        DefaultMQProducer loose = Clients.producer(c, "-loose", null);
        loose.setMaxMessageSize(8 * 1024 * 1024);  // the client lets it through: the broker's check
        loose.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        loose.setRetryTimesWhenSendFailed(0);
        loose.start();
        try {
            sent(c, "body-broker", "big", loose.send(msg(topic, "big", big)));
        } catch (Exception e) {
            error(c, "body-broker", e);
        }
        loose.shutdown();
        String[][] topics = {{"topic-illegal", "bad topic!"}, {"topic-missing", c.arg("missing_topic")},
            {"topic-readonly", c.arg("readonly_topic")}};
        for (String[] t : topics) {
            try {
                sent(c, t[0], "x", p.send(msg(t[1], "x")));
            } catch (Exception e) {
                error(c, t[0], e);
            }
        }
        DefaultMQPushConsumer illegal = Clients.push(c, "bad group!", "-g", null);
        try {
            illegal.subscribe(topic, "*");
            illegal.registerMessageListener((MessageListenerConcurrently) (msgs, context) ->
                ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
            illegal.start();
            c.out("STARTED group-illegal");
            illegal.shutdown();
        } catch (Exception e) {
            error(c, "group-illegal", e);
        }
        @SuppressWarnings("deprecation")
        DefaultMQPullConsumer pull = new DefaultMQPullConsumer(c.arg("missing_group"));
        Clients.setup(c, pull, "-pull");
        pull.start();
        try {
            MessageQueue mq = pull.fetchSubscribeMessageQueues(topic).iterator().next();
            c.out("PULLED group-missing " + pull.pull(mq, "*", 0, 1).getPullStatus());
        } catch (Exception e) {
            error(c, "group-missing", e);
        }
        pull.shutdown();
        p.shutdown();
    }
}
