package orbitmq.interop.mqadmin;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

/**
 * Live clients for the mqadmin commands that ask about them (consumerConnection,
 * consumerStatus, producerConnection, producer): a DefaultMQProducer that sends COUNT messages
 * and a DefaultMQPushConsumer that consumes TOPIC from its first offset. Runs until stdin closes.
 *
 * <p>Usage: Clients NAMESRV TOPIC PRODUCER_GROUP CONSUMER_GROUP COUNT. Prints
 * {@code SENT <key> <msgId>}, {@code RECV <key>}, then {@code READY <producerClientId> <consumerClientId>}
 * once every message was consumed.
 */
public final class Clients {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[4]);
        AtomicInteger received = new AtomicInteger();

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[3]);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("mqadmin-consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            msgs.forEach(m -> {
                System.out.println("RECV " + m.getKeys());
                received.incrementAndGet();
            });
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        DefaultMQProducer producer = new DefaultMQProducer(args[2]);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("mqadmin-producer");
        producer.start();
        for (int i = 0; i < count; i++) {
            String key = "key-" + i;
            Message msg = new Message(topic, "TagA", key, ("body-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult result = producer.send(msg);
            System.out.println("SENT " + key + " " + result.getMsgId());
        }
        long deadline = System.currentTimeMillis() + 60_000;
        while (received.get() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        // The listener returned for the last message; its offset moves just after. The consumer
        // persists offsets every 5 s: commit them now so the brokers show them.
        Thread.sleep(300);
        consumer.getDefaultMQPushConsumerImpl().persistConsumerOffset();
        System.out.println("READY " + producer.buildMQClientId() + " " + consumer.buildMQClientId());
        System.out.flush();
        while (System.in.read() >= 0) {
            // until the test closes stdin
        }
        producer.shutdown();
        consumer.shutdown();
        System.exit(0);
    }
}
