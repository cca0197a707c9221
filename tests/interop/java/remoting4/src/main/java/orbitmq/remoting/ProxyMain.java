package orbitmq.remoting;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The Remoting client (4.9.8 or 5.5.0) through the proxy's Remoting port, for
 * tests/interop/java/test_java_proxy_remoting.py: the proxy's address is the client's NameServer
 * (RIP-55; the proxy answers GET_ROUTEINFO_BY_TOPIC with itself as every broker set).
 *
 * <p>Arguments {@code key=value}: namesrv (the proxy's Remoting address), topic, txTopic, group,
 * id. Sync sends and a batch, a push consumer receiving them all and committing its offsets, a
 * lite pull consumer doing the same with commitSync, a transaction committed by the producer and
 * one committed by the broker's check-back. Prints {@code SENT}, {@code RECEIVED}, {@code LITE},
 * {@code CHECKED} lines and last {@code PROXY OK} or {@code PROXY FAIL}.
 */
public final class ProxyMain {
    private static final int SINGLES = 8;
    private static final int BATCH = 3;

    private ProxyMain() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (String a : argv) {
            int eq = a.indexOf('=');
            args.put(a.substring(0, eq), a.substring(eq + 1));
        }
        try {
            run(args);
            System.out.println("PROXY OK");
        } catch (Throwable t) {
            t.printStackTrace(System.out);
            System.out.println("PROXY FAIL " + t);
        }
        System.out.flush();
        Runtime.getRuntime().halt(0); // the clients' non-daemon threads must not keep the JVM up
    }

    private static void waitFor(BooleanSupplier done, long ms, String what) throws InterruptedException {
        long end = System.currentTimeMillis() + ms;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > end) {
                throw new IllegalStateException("timed out: " + what);
            }
            Thread.sleep(100);
        }
    }

    private static Message message(String topic, String body) {
        return new Message(topic, body.getBytes(StandardCharsets.UTF_8));
    }

    private static void run(Map<String, String> args) throws Exception {
        String namesrv = args.get("namesrv");
        String topic = args.get("topic");
        String id = args.get("id");

        DefaultMQProducer producer = new DefaultMQProducer("PProxy" + id);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("proxy-p-" + id);
        producer.start();
        Set<String> sent = new TreeSet<>();
        Set<String> brokers = new TreeSet<>();
        for (int i = 0; i < SINGLES; i++) {
            String body = "single-" + id + "-" + i;
            SendResult r = producer.send(message(topic, body));
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                throw new IllegalStateException("send " + body + ": " + r);
            }
            brokers.add(r.getMessageQueue().getBrokerName());
            sent.add(body);
        }
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < BATCH; i++) {
            batch.add(message(topic, "batch-" + id + "-" + i));
        }
        SendResult rb = producer.send(batch);
        if (rb.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException("batch: " + rb);
        }
        for (Message m : batch) {
            sent.add(new String(m.getBody(), StandardCharsets.UTF_8));
        }
        System.out.println("SENT " + sent.size() + " brokers=" + String.join(",", brokers));

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("proxy-c-" + id);
        consumer.subscribe(topic, "*");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(1000);
        Set<String> received = ConcurrentHashMap.newKeySet();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                received.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        waitFor(() -> received.containsAll(sent), 90_000, "the push consumer receiving " + sent);
        System.out.println("RECEIVED " + received.size());
        Thread.sleep(2500); // the offset store's timer commits (UPDATE_CONSUMER_OFFSET through the proxy)
        consumer.shutdown(); // and commits once more

        DefaultLitePullConsumer lite = new DefaultLitePullConsumer(args.get("group") + "Lite");
        lite.setNamesrvAddr(namesrv);
        lite.setInstanceName("proxy-l-" + id);
        lite.setAutoCommit(false);
        lite.setPersistConsumerOffsetInterval(1000);
        lite.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        lite.subscribe(topic, "*");
        lite.start();
        Set<String> pulled = new TreeSet<>();
        long liteEnd = System.currentTimeMillis() + 90_000;
        while (!pulled.containsAll(sent)) {
            if (System.currentTimeMillis() > liteEnd) {
                throw new IllegalStateException("timed out: the lite pull consumer polling " + sent + ", got " + pulled);
            }
            for (MessageExt m : lite.poll(1000)) {
                pulled.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
        }
        lite.commitSync();
        System.out.println("LITE " + pulled.size());
        Thread.sleep(1500); // commitSync stores locally; the offset store's timer sends them
        lite.shutdown(); // and shutdown once more

        AtomicInteger checks = new AtomicInteger();
        TransactionMQProducer tx = new TransactionMQProducer("PProxyTx" + id);
        tx.setNamesrvAddr(namesrv);
        tx.setInstanceName("proxy-t-" + id);
        tx.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                boolean now = new String(msg.getBody(), StandardCharsets.UTF_8).startsWith("commit");
                return now ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.incrementAndGet();
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        tx.start();
        String txTopic = args.get("txTopic");
        TransactionSendResult now = tx.sendMessageInTransaction(message(txTopic, "commit-" + id), null);
        TransactionSendResult later = tx.sendMessageInTransaction(message(txTopic, "check-" + id), null);
        if (now.getLocalTransactionState() != LocalTransactionState.COMMIT_MESSAGE
            || later.getLocalTransactionState() != LocalTransactionState.UNKNOW) {
            throw new IllegalStateException("transactions: " + now + " / " + later);
        }
        waitFor(() -> checks.get() > 0, 60_000, "the broker's check-back through the proxy");
        System.out.println("CHECKED " + checks.get());
        Thread.sleep(1000); // the oneway END_TRANSACTION of the check on its way
        tx.shutdown();
        producer.shutdown();
    }
}
