package orbitmq.interop;

import java.io.Closeable;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The Java gRPC client (rocketmq-client-java) against an OrbitMQ proxy, unmodified.
 *
 * <p>Usage: {@code GrpcClient endpoints=H:P ssl=true|false [ak=.. sk=..] +scenario k=v ... +scenario ...}.
 * Each scenario prints one line per outcome ({@code <scenario> SENT|RECV|ERROR|... fields}); the pytest
 * side (tests/interop/java/test_java_grpc.py) parses them and asserts. Several scenarios share one JVM to
 * keep the JVM start-ups few.
 */
public final class GrpcClient {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();
    private static final Pattern CODE = Pattern.compile("response-code=(\\d+)");
    private static ClientConfiguration config;

    private GrpcClient() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> global = new HashMap<>();
        List<Map<String, String>> scenarios = new ArrayList<>();
        Map<String, String> current = global;
        for (String arg : args) {
            if (arg.startsWith("+")) {
                current = new HashMap<>();
                current.put("scenario", arg.substring(1));
                scenarios.add(current);
            } else {
                int eq = arg.indexOf('=');
                current.put(arg.substring(0, eq), arg.substring(eq + 1));
            }
        }
        int failed = 0;
        for (Map<String, String> s : scenarios) {
            String name = s.get("scenario");
            // A scenario's own ak/sk (ACL 2.0 credentials) take the place of the global ones.
            config = configuration(global.get("endpoints"), Boolean.parseBoolean(global.getOrDefault("ssl", "false")),
                s.getOrDefault("ak", global.get("ak")), s.getOrDefault("sk", global.get("sk")));
            long started = System.currentTimeMillis();
            try {
                switch (name) {
                    case "send": send(s); break;
                    case "simple": simple(s); break;
                    case "priority": priority(s); break;
                    case "push": push(s); break;
                    case "transaction": transaction(s); break;
                    case "auth": auth(s); break;
                    case "authRefused": authRefused(s); break;
                    case "errors": errors(s); break;
                    default: throw new IllegalArgumentException("unknown scenario " + name);
                }
                emit(name, "DONE", (System.currentTimeMillis() - started) + "ms");
            } catch (Throwable t) {
                failed++;
                emit(name, "FAILED", describe(t));
                t.printStackTrace();
            }
        }
        System.out.flush();
        // The client's own threads (telemetry, schedulers) are not daemons: leave at once.
        System.exit(failed == 0 ? 0 : 1);
    }

    static ClientConfiguration configuration(String endpoints, boolean ssl, String ak, String sk) {
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder().setEndpoints(endpoints).enableSsl(ssl)
            .setRequestTimeout(Duration.ofSeconds(5));
        if (ak != null) {
            builder.setCredentialProvider(new StaticSessionCredentialsProvider(ak, sk));
        }
        return builder.build();
    }

    // ---- scenarios --------------------------------------------------------------------------------

    /** Sync, async, FIFO, delay, priority and a recalled timer message; all read back by one SimpleConsumer. */
    static void send(Map<String, String> s) throws Exception {
        String normal = s.get("normal");
        String fifo = s.get("fifo");
        String delay = s.get("delay");
        Map<String, String> expected = new ConcurrentHashMap<>();  // key -> topic
        try (Producer producer = producer(null, normal, fifo, delay)) {
            for (int i = 0; i < 3; i++) {
                SendReceipt r = producer.send(message(normal, "sync-" + i).setTag("sync").build());
                emit("send", "SENT", "sync-" + i, r.getMessageId().toString());
                expected.put("sync-" + i, normal);
            }
            List<CompletableFuture<SendReceipt>> futures = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                futures.add(producer.sendAsync(message(normal, "async-" + i).setTag("async").build()));
            }
            for (int i = 0; i < 3; i++) {
                emit("send", "SENT", "async-" + i, futures.get(i).get().getMessageId().toString());
                expected.put("async-" + i, normal);
            }
            for (int i = 0; i < 4; i++) {
                for (String group : new String[] {"g0", "g1"}) {
                    String key = "fifo-" + group + "-" + i;
                    SendReceipt r = producer.send(message(fifo, key).setMessageGroup(group).build());
                    emit("send", "SENT", key, r.getMessageId().toString());
                    expected.put(key, fifo);
                }
            }
            long at = System.currentTimeMillis() + 2000;
            SendReceipt delayed = producer.send(message(delay, "delay-0").setDeliveryTimestamp(at).build());
            emit("send", "SENT", "delay-0", delayed.getMessageId().toString(), String.valueOf(at));
            expected.put("delay-0", delay);
            long recallAt = System.currentTimeMillis() + 3000;
            SendReceipt timer = producer.send(message(delay, "recall-0").setDeliveryTimestamp(recallAt).build());
            emit("send", "SENT", "recall-0", timer.getMessageId().toString(), String.valueOf(recallAt));
            try {
                String id = producer.recallMessage(delay, timer.getRecallHandle()).getMessageId().toString();
                emit("send", "RECALLED", "recall-0", id);
            } catch (Throwable t) {
                emit("send", "ERROR", "recall", describe(t));
            }
            try {
                SendReceipt r = producer.send(message(normal, "priority-0").setPriority(1).build());
                emit("send", "SENT", "priority-0", r.getMessageId().toString());
                expected.put("priority-0", normal);
            } catch (Throwable t) {
                emit("send", "ERROR", "priority", describe(t));
            }
            Map<String, FilterExpression> subs = new HashMap<>();
            for (String topic : new String[] {normal, fifo, delay}) {
                subs.put(topic, FilterExpression.SUB_ALL);
            }
            // Read on until everything came and the recalled message's time has passed by a margin.
            long until = recallAt + 1500;
            try (SimpleConsumer consumer = simpleConsumer(s.get("group"), subs)) {
                drain(consumer, "send", expected, until, Duration.ofSeconds(10));
            }
        }
    }

    /**
     * RIP-80: priorities 0, 2, 1 and 5 to a PRIORITY topic (its route accepts PRIORITY), sent before
     * anyone receives; a SimpleConsumer of a concurrent group then gets the backlog highest queue first.
     */
    static void priority(Map<String, String> s) throws Exception {
        String topic = s.get("topic");
        Map<String, String> expected = new ConcurrentHashMap<>();
        try (Producer producer = producer(null, topic)) {
            for (int p : new int[] {0, 2, 1, 5}) {
                String key = "prio-" + p;
                try {
                    SendReceipt r = producer.send(message(topic, key).setPriority(p).build());
                    emit("priority", "SENT", key, r.getMessageId().toString());
                    expected.put(key, topic);
                } catch (Throwable t) {
                    emit("priority", "ERROR", key, describe(t));
                }
            }
        }
        try (SimpleConsumer consumer = simpleConsumer(s.get("group"),
            Collections.singletonMap(topic, FilterExpression.SUB_ALL))) {
            drain(consumer, "priority", expected, 0, Duration.ofSeconds(10));
        }
    }

    /** Tag and SQL92 filters; ack; changeInvisibleDuration longer (then ack) and shorter (redelivered). */
    static void simple(Map<String, String> s) throws Exception {
        String topic = s.get("topic");
        String[] tags = {"A", "B", "A", "B", "C", "A"};
        try (Producer producer = producer(null, topic)) {
            for (int i = 0; i < tags.length; i++) {
                Message m = message(topic, "k" + i).setTag(tags[i]).addProperty("n", String.valueOf(i)).build();
                emit("simple", "SENT", "k" + i, producer.send(m).getMessageId().toString());
            }
        }
        Map<String, String> tagged = new ConcurrentHashMap<>();
        for (int i = 0; i < tags.length; i++) {
            if (!tags[i].equals("B")) {
                tagged.put("k" + i, topic);
            }
        }
        FilterExpression byTag = new FilterExpression("A || C", FilterExpressionType.TAG);
        try (SimpleConsumer consumer = simpleConsumer(s.get("tagGroup"), Collections.singletonMap(topic, byTag))) {
            long deadline = System.currentTimeMillis() + 30_000;
            MessageView extended = null;
            MessageView shortened = null;
            Set<String> acked = new HashSet<>();
            while (System.currentTimeMillis() < deadline && acked.size() < tagged.size()) {
                for (MessageView m : consumer.receive(16, Duration.ofSeconds(10))) {
                    String key = key(m);
                    emit("simple", "RECV", "tag", key, m.getTag().orElse("-"), String.valueOf(m.getDeliveryAttempt()));
                    if (extended == null) {
                        extended = m;
                        consumer.changeInvisibleDuration(m, Duration.ofSeconds(30));
                        consumer.ack(m);  // acked with the handle changeInvisibleDuration returned
                        emit("simple", "EXTENDED_ACK", key);
                        acked.add(key);
                    } else if (shortened == null) {
                        shortened = m;
                        consumer.changeInvisibleDuration(m, Duration.ofSeconds(1));
                        emit("simple", "SHORTENED", key);
                    } else {
                        consumer.ack(m);
                        acked.add(key);
                    }
                }
            }
        }
        String sql = "n > 2 AND n < 5";
        FilterExpression bySql = new FilterExpression(sql, FilterExpressionType.SQL92);
        Map<String, String> selected = new ConcurrentHashMap<>(Map.of("k3", topic, "k4", topic));
        try (SimpleConsumer consumer = simpleConsumer(s.get("sqlGroup"), Collections.singletonMap(topic, bySql))) {
            drain(consumer, "simple", selected, 0, Duration.ofSeconds(10));
        }
    }

    /** PushConsumer: concurrently, FIFO in message-group order, and a failing listener ending in the DLQ. */
    static void push(Map<String, String> s) throws Exception {
        String topic = s.get("topic");
        String fifo = s.get("fifoTopic");
        String dlq = s.get("dlqTopic");
        Set<String> concurrent = ConcurrentHashMap.newKeySet();
        Set<String> ordered = ConcurrentHashMap.newKeySet();
        AtomicInteger attempts = new AtomicInteger();
        // Closed together at the end: a PushConsumer's close waits for its long polls to return.
        List<Closeable> open = new ArrayList<>();
        try {
            open.add(pushConsumer(s.get("group"), topic, m -> {
                emit("push", "RECV", "concurrent", key(m), String.valueOf(m.getDeliveryAttempt()));
                concurrent.add(key(m));
                return ConsumeResult.SUCCESS;
            }));
            open.add(pushConsumer(s.get("fifoGroup"), fifo, m -> {
                emit("push", "RECV", "fifo", key(m), m.getMessageGroup().orElse("-"),
                    String.valueOf(m.getDeliveryAttempt()));
                ordered.add(key(m));
                return ConsumeResult.SUCCESS;
            }));
            open.add(pushConsumer(s.get("dlqGroup"), dlq, m -> {
                attempts.incrementAndGet();
                emit("push", "RECV", "failing", key(m), String.valueOf(m.getDeliveryAttempt()));
                return ConsumeResult.FAILURE;
            }));
            Producer producer = producer(null, topic, fifo, dlq);
            open.add(producer);
            for (int i = 0; i < 8; i++) {
                producer.send(message(topic, "c" + i).build());
            }
            for (int i = 0; i < 4; i++) {
                for (String group : new String[] {"g0", "g1", "g2"}) {
                    producer.send(message(fifo, "f-" + group + "-" + i).setMessageGroup(group).build());
                }
            }
            producer.send(message(dlq, "dead-0").build());
            int maxAttempts = Integer.parseInt(s.get("maxAttempts"));
            long deadline = System.currentTimeMillis() + 40_000;
            while (System.currentTimeMillis() < deadline
                && (concurrent.size() < 8 || ordered.size() < 12 || attempts.get() < maxAttempts)) {
                Thread.sleep(100);
            }
        } finally {
            closeAll(open);
        }
        // The failing listener's message, once its attempts are used up, is in %DLQ%<group>.
        String dlqTopic = "%DLQ%" + s.get("dlqGroup");
        Map<String, String> dead = new ConcurrentHashMap<>(Map.of("dead-0", dlqTopic));
        long until = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < until) {
            try (SimpleConsumer consumer = simpleConsumer(s.get("dlqReader"),
                Collections.singletonMap(dlqTopic, FilterExpression.SUB_ALL))) {
                drain(consumer, "push", dead, 0, Duration.ofSeconds(20));
                break;
            } catch (IllegalStateException e) {
                // The DLQ topic appears when the broker moves the first message there.
                emit("push", "WAIT_DLQ", describe(e));
                Thread.sleep(500);
            }
        }
    }

    /**
     * Transactions: commit, rollback, and three left open (unknown) that the TransactionChecker resolves on
     * check-back; one it answers UNKNOWN first, so the broker must ask again.
     */
    static void transaction(Map<String, String> s) throws Exception {
        String topic = s.get("topic");
        Map<String, AtomicInteger> checked = new ConcurrentHashMap<>();
        Map<String, String> committed = new ConcurrentHashMap<>(Map.of("tx-commit", topic, "tx-check-commit", topic,
            "tx-check-unknown", topic));
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics(topic)
            .setTransactionChecker(m -> {
                String key = key(m);
                int n = checked.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
                emit("transaction", "CHECK", key, String.valueOf(n));
                if (key.equals("tx-check-unknown") && n == 1) {
                    return TransactionResolution.UNKNOWN;
                }
                return key.contains("rollback") ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
            }).build()) {
            for (String key : new String[] {"tx-commit", "tx-rollback", "tx-check-commit", "tx-check-rollback",
                "tx-check-unknown"}) {
                Transaction tx = producer.beginTransaction();
                SendReceipt r = producer.send(message(topic, key).build(), tx);
                emit("transaction", "SENT", key, r.getMessageId().toString());
                if (key.equals("tx-commit")) {
                    tx.commit();
                } else if (key.equals("tx-rollback")) {
                    tx.rollback();
                }
            }
            try (SimpleConsumer consumer = simpleConsumer(s.get("group"),
                Collections.singletonMap(topic, FilterExpression.SUB_ALL))) {
                drain(consumer, "transaction", committed, 0, Duration.ofSeconds(10));
                long deadline = System.currentTimeMillis() + 20_000;
                while (System.currentTimeMillis() < deadline && checked.size() < 3) {
                    Thread.sleep(100);
                }
                // A rolled-back message must not come: read on briefly after the checks.
                drain(consumer, "transaction", new ConcurrentHashMap<>(), System.currentTimeMillis() + 1500,
                    Duration.ofSeconds(10));
            }
        }
    }

    /** ACL 2.0: a user's send and receive on what its policy allows. */
    static void auth(Map<String, String> s) throws Exception {
        String topic = s.get("topic");
        try (Producer producer = producer(null, topic)) {
            SendReceipt r = producer.send(message(topic, "auth-0").build());
            emit("auth", "SENT", "auth-0", r.getMessageId().toString());
        }
        try (SimpleConsumer consumer = simpleConsumer(s.get("group"),
            Collections.singletonMap(topic, FilterExpression.SUB_ALL))) {
            drain(consumer, "auth", new ConcurrentHashMap<>(Map.of("auth-0", topic)), 0, Duration.ofSeconds(10));
        }
    }

    /** ACL 2.0 refusals: a send to a topic the user may not write, and a wrong secret. */
    static void authRefused(Map<String, String> s) throws Exception {
        String topic = s.get("topic");
        try (Producer producer = producer(null, topic)) {
            producer.send(message(s.get("denied"), "denied-0").build());
            emit("authRefused", "SENT", "denied-0");
        } catch (Throwable t) {
            emit("authRefused", "ERROR", "denied", describe(t));
        }
        ClientConfiguration wrong = configuration(config.getEndpoints(), config.isSslEnabled(), s.get("ak"),
            "not-the-secret");
        try (Producer producer = producer(wrong, topic)) {
            producer.send(message(topic, "wrong-0").build());
            emit("authRefused", "SENT", "wrong-0");
        } catch (Throwable t) {
            emit("authRefused", "ERROR", "wrong-secret", describe(t));
        }
    }

    /** Bad input: what the client throws for each, printed as ERROR <case> <exception> <code> <message>. */
    static void errors(Map<String, String> s) throws Exception {
        String topic = s.get("topic");
        try (Producer producer = producer(null, topic)) {
            byte[] big = new byte[Integer.parseInt(s.get("maxMessageSize")) + 1];
            attempt("body-too-large", () -> producer.send(PROVIDER.newMessageBuilder().setTopic(topic).setBody(big)
                .build()));
            attempt("illegal-topic-chars", () -> producer.send(message("bad topic!", "x").build()));
            attempt("illegal-topic-long", () -> producer.send(message("t".repeat(128), "x").build()));
            attempt("system-topic", () -> producer.send(message("SCHEDULE_TOPIC_XXXX", "x").build()));
            attempt("topic-not-found", () -> producer.send(message(s.get("missingTopic"), "x").build()));
            attempt("read-only-topic", () -> producer.send(message(s.get("readOnly"), "x").build()));
            attempt("fifo-to-normal-topic", () -> producer.send(message(topic, "x").setMessageGroup("g").build()));
            attempt("empty-body", () -> producer.send(PROVIDER.newMessageBuilder().setTopic(topic)
                .setBody(new byte[0]).build()));
            SendReceipt r = producer.send(message(topic, "expiring").build());
            emit("errors", "SENT", "expiring", r.getMessageId().toString());
        }
        Map<String, FilterExpression> subs = new HashMap<>(Map.of(topic, FilterExpression.SUB_ALL));
        attempt("illegal-group-chars", () -> simpleConsumer("bad group!", subs).close());
        attempt("illegal-group-long", () -> {
            try (SimpleConsumer c = simpleConsumer("g".repeat(256), subs)) {
                c.receive(1, Duration.ofSeconds(10));
            }
        });
        attempt("group-not-found", () -> {
            try (SimpleConsumer c = simpleConsumer(s.get("missingGroup"), subs)) {
                c.receive(1, Duration.ofSeconds(10));
            }
        });
        attempt("subscription-topic-not-found", () -> {
            try (SimpleConsumer c = simpleConsumer(s.get("group"),
                Collections.singletonMap(s.get("missingTopic"), FilterExpression.SUB_ALL))) {
                c.receive(1, Duration.ofSeconds(10));
            }
        });
        try (SimpleConsumer c = simpleConsumer(s.get("group"), new HashMap<>(subs))) {
            attempt("illegal-sql", () -> {
                c.subscribe(topic, new FilterExpression("n >>", FilterExpressionType.SQL92));
                c.receive(1, Duration.ofSeconds(10));
            });
            c.subscribe(topic, FilterExpression.SUB_ALL);
            attempt("missing-subscription", () -> {
                c.unsubscribe(topic);
                c.receive(1, Duration.ofSeconds(10));
            });
            c.subscribe(topic, FilterExpression.SUB_ALL);
            attempt("illegal-invisible-duration", () -> c.receive(1, Duration.ofMillis(10)));
            // Expired receipt handle: its invisible time passes before the ack.
            MessageView m = null;
            long deadline = System.currentTimeMillis() + 20_000;
            while (m == null && System.currentTimeMillis() < deadline) {
                for (MessageView v : c.receive(1, Duration.ofSeconds(1))) {
                    m = v;
                }
            }
            if (m == null) {
                emit("errors", "FAILED", "nothing to receive for the expired receipt handle");
                return;
            }
            emit("errors", "RECV", key(m));
            Thread.sleep(2500);
            final MessageView stale = m;
            attempt("expired-receipt-handle-ack", () -> c.ack(stale));
            attempt("expired-receipt-handle-change", () -> c.changeInvisibleDuration(stale, Duration.ofSeconds(5)));
        }
    }

    // ---- helpers ----------------------------------------------------------------------------------

    interface Action {
        void run() throws Exception;
    }

    static void attempt(String label, Action action) {
        try {
            action.run();
            emit("errors", "OK", label);
        } catch (Throwable t) {
            emit("errors", "ERROR", label, describe(t));
        }
    }

    /** Close every client at once, each on a thread of its own. */
    static void closeAll(List<Closeable> clients) throws InterruptedException {
        List<Thread> threads = new ArrayList<>();
        for (Closeable client : clients) {
            Thread t = new Thread(() -> {
                try {
                    client.close();
                } catch (Exception e) {
                    emit("close", "FAILED", describe(e));
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
    }

    static Producer producer(ClientConfiguration conf, String... topics) throws ClientException {
        return PROVIDER.newProducerBuilder().setClientConfiguration(conf == null ? config : conf)
            .setTopics(topics).build();
    }

    static SimpleConsumer simpleConsumer(String group, Map<String, FilterExpression> subs) throws ClientException {
        return PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config).setConsumerGroup(group)
            .setSubscriptionExpressions(subs).setAwaitDuration(Duration.ofSeconds(2)).build();
    }

    static PushConsumer pushConsumer(String group, String topic,
        org.apache.rocketmq.client.apis.consumer.MessageListener listener) throws ClientException {
        return PROVIDER.newPushConsumerBuilder().setClientConfiguration(config).setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setConsumptionThreadCount(2).setMessageListener(listener).build();
    }

    static MessageBuilder message(String topic, String key) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setKeys(key)
            .setBody(("body of " + key).getBytes(StandardCharsets.UTF_8));
    }

    static String key(MessageView m) {
        return m.getKeys().isEmpty() ? "-" : m.getKeys().iterator().next();
    }

    /**
     * Receive and ack until every key of {@code expected} came (and, with {@code until} > 0, that time
     * passed); each message prints RECV <key> <topic> <msgId> <attempt> <receivedAtMs> <bodyOk> <messageGroup>.
     */
    static void drain(SimpleConsumer consumer, String scenario, Map<String, String> expected, long until,
        Duration invisible) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        Set<String> seen = new HashSet<>();
        while (System.currentTimeMillis() < deadline
            && (!seen.containsAll(expected.keySet()) || System.currentTimeMillis() < until)) {
            for (MessageView m : consumer.receive(16, invisible)) {
                String key = key(m);
                byte[] body = new byte[m.getBody().remaining()];
                m.getBody().get(body);
                boolean bodyOk = new String(body, StandardCharsets.UTF_8).equals("body of " + key);
                emit(scenario, "RECV", key, m.getTopic(), m.getMessageId().toString(),
                    String.valueOf(m.getDeliveryAttempt()), String.valueOf(System.currentTimeMillis()),
                    String.valueOf(bodyOk), m.getMessageGroup().orElse("-"));
                consumer.ack(m);
                seen.add(key);
            }
        }
    }

    /** "<exception> <response code or -> <message>": the ClientException in the chain, else the outermost. */
    static String describe(Throwable t) {
        Throwable e = t;
        while (!(e instanceof ClientException) && e.getCause() != null && e.getCause() != e) {
            e = e.getCause();
        }
        if (!(e instanceof ClientException)) {
            e = t;
        }
        String message = String.valueOf(e.getMessage()).replace('\n', ' ');
        Matcher code = CODE.matcher(message);
        return e.getClass().getSimpleName() + " " + (code.find() ? code.group(1) : "-") + " " + message;
    }

    static synchronized void emit(String... fields) {
        System.out.println(String.join(" ", fields));
        System.out.flush();
    }
}
