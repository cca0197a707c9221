package orbitmq.remoting;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * The Remoting load generator of {@code orbitmq bench rocketmq} (sdk/bench/rocketmq.py): sends
 * straight to the broker with DefaultMQProducer, the same program against Apache's broker and
 * OrbitMQ's.
 *
 * <p>Arguments (key=value): {@code ns=H:P topic=T mode=single|batch seconds=S size=B warmup=S
 * window=N} (single: asynchronous sends, at most N in flight) {@code batch=N threads=N} (batch:
 * send(Collection) of N messages from that many threads at once). It first waits for one
 * acknowledged send (route fetched, connection open), then sends uncounted for {@code warmup}
 * seconds (the JIT), prints {@code TIMED <mode>}, runs for {@code seconds} and prints
 * {@code RESULT mode=M msgs=N seconds=S errors=E cpu=C}: messages acknowledged SEND_OK, the seconds
 * from the first send to the last answer, failed sends (exceptions or another status) and the
 * CPU seconds this JVM spent meanwhile (the load generator's own cost).
 */
public final class SendLoad {
    private SendLoad() {
    }

    public static void main(String[] args) throws Exception {
        Ctx c = new Ctx("bench-load", Arrays.asList(args));
        String mode = c.arg("mode", "single");
        String topic = c.arg("topic");
        byte[] body = new byte[c.num("size", 1024)];
        Arrays.fill(body, (byte) 'x');
        double seconds = Double.parseDouble(c.arg("seconds", "10"));
        double warmup = Double.parseDouble(c.arg("warmup", "2"));
        DefaultMQProducer producer = Clients.producer(c, "-" + mode, null);
        producer.setSendMsgTimeout(10_000);
        producer.start();
        try {
            first(producer, topic, body);
            run(producer, mode, topic, body, warmup, c);
            System.out.println("TIMED " + mode);
            System.out.flush();
            long cpu = cpuNanos();
            long[] r = run(producer, mode, topic, body, seconds, c);
            System.out.printf("RESULT mode=%s msgs=%d seconds=%.4f errors=%d cpu=%.4f%n", mode, r[0], r[2] / 1e9, r[1],
                (cpuNanos() - cpu) / 1e9);
            System.out.flush();
        } finally {
            producer.shutdown();
        }
        // The client's own non-daemon threads (timers, Netty) must not keep the JVM up.
        Runtime.getRuntime().halt(0);
    }

    /** Until one synchronous send is acknowledged: the route reaches the NameServer a little late. */
    private static void first(DefaultMQProducer producer, String topic, byte[] body) throws Exception {
        long end = System.currentTimeMillis() + 60_000;
        while (true) {
            try {
                if (producer.send(new Message(topic, body)).getSendStatus() == SendStatus.SEND_OK) {
                    return;
                }
            } catch (Exception e) {
                if (System.currentTimeMillis() > end) {
                    throw e;
                }
            }
            Thread.sleep(100);
        }
    }

    /** {messages acknowledged, errors, nanoseconds}. */
    private static long[] run(DefaultMQProducer producer, String mode, String topic, byte[] body, double seconds,
        Ctx c) throws Exception {
        if (seconds <= 0) {
            return new long[] {0, 0, 0};
        }
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        return mode.equals("batch")
            ? batches(producer, topic, body, deadline, c.num("batch", 32), c.num("threads", 4))
            : singles(producer, topic, body, deadline, c.num("window", 64));
    }

    private static long[] singles(DefaultMQProducer producer, String topic, byte[] body, long deadline, int window)
        throws InterruptedException {
        Semaphore slots = new Semaphore(window);
        AtomicLong ok = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        long started = System.nanoTime();
        while (System.nanoTime() < deadline) {
            slots.acquire();
            AtomicBoolean answered = new AtomicBoolean();  // one release a send, whichever path reports it
            Runnable done = () -> {
                if (answered.compareAndSet(false, true)) {
                    slots.release();
                }
            };
            try {
                producer.send(new Message(topic, body), new SendCallback() {
                    @Override
                    public void onSuccess(SendResult result) {
                        (result.getSendStatus() == SendStatus.SEND_OK ? ok : errors).incrementAndGet();
                        done.run();
                    }

                    @Override
                    public void onException(Throwable e) {
                        failed(errors, e);
                        done.run();
                    }
                });
            } catch (Exception e) {
                if (!answered.get()) {
                    failed(errors, e);
                }
                done.run();
            }
        }
        slots.acquire(window);  // the last sends in flight answered
        return new long[] {ok.get(), errors.get(), System.nanoTime() - started};
    }

    private static long[] batches(DefaultMQProducer producer, String topic, byte[] body, long deadline, int size,
        int threads) throws InterruptedException {
        AtomicLong ok = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        long started = System.nanoTime();
        List<Thread> senders = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread sender = new Thread(() -> {
                while (System.nanoTime() < deadline) {
                    List<Message> batch = new ArrayList<>(size);
                    for (int i = 0; i < size; i++) {
                        batch.add(new Message(topic, body));
                    }
                    try {
                        if (producer.send(batch).getSendStatus() == SendStatus.SEND_OK) {
                            ok.addAndGet(size);
                        } else {
                            errors.incrementAndGet();
                        }
                    } catch (Exception e) {
                        failed(errors, e);
                    }
                }
            }, "batch-sender-" + t);
            sender.start();
            senders.add(sender);
        }
        for (Thread sender : senders) {
            sender.join();
        }
        return new long[] {ok.get(), errors.get(), System.nanoTime() - started};
    }

    /** Counts a failed send; the first few are printed (stderr) to say why. */
    private static void failed(AtomicLong errors, Throwable e) {
        if (errors.incrementAndGet() <= 3) {
            System.err.println("send failed: " + e);
        }
    }

    /** CPU nanoseconds of this JVM, all threads. */
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
            .getOperatingSystemMXBean()).getProcessCpuTime();
    }
}
