package orbitmq.interop;

import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * The gRPC load generator of {@code orbitmq bench rocketmq} (sdk/bench/rocketmq.py): single-message
 * sends through a proxy with the official Java client (rocketmq-client-java), Producer.sendAsync
 * with at most {@code window} sends in flight; the same program against Apache's proxy and
 * OrbitMQ's.
 *
 * <p>Arguments (key=value): {@code endpoints=H:P topic=T seconds=S window=N size=B warmup=S}. It
 * first waits for one acknowledged send (route fetched, connection open), then sends uncounted
 * for {@code warmup} seconds (the JIT), prints {@code TIMED grpc}, runs for {@code seconds} and
 * prints {@code RESULT mode=grpc msgs=N seconds=S errors=E cpu=C}: sends acknowledged, the seconds from
 * the first send to the last answer, sends that failed and the CPU seconds this JVM spent
 * meanwhile (the load generator's own cost).
 */
public final class SendLoad {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private SendLoad() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            a.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        String topic = a.get("topic");
        byte[] body = new byte[Integer.parseInt(a.getOrDefault("size", "1024"))];
        Arrays.fill(body, (byte) 'x');
        int window = Integer.parseInt(a.getOrDefault("window", "64"));
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(a.get("endpoints"))
            .enableSsl(false).setRequestTimeout(Duration.ofSeconds(10)).build();  // a loaded 2-core machine
        int status = 0;
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics(topic)
            .build()) {
            first(producer, topic, body);
            run(producer, topic, body, Double.parseDouble(a.getOrDefault("warmup", "2")), window);
            System.out.println("TIMED grpc");
            System.out.flush();
            long cpu = cpuNanos();
            long[] r = run(producer, topic, body, Double.parseDouble(a.getOrDefault("seconds", "10")), window);
            System.out.printf("RESULT mode=grpc msgs=%d seconds=%.4f errors=%d cpu=%.4f%n", r[0], r[2] / 1e9, r[1],
                (cpuNanos() - cpu) / 1e9);
            System.out.flush();
        } catch (Throwable t) {
            t.printStackTrace();
            status = 1;
        }
        // The client's own threads (telemetry, schedulers) are not daemons: leave at once.
        Runtime.getRuntime().halt(status);
    }

    /** Until one send is acknowledged: a route reaches a proxy a little after the topic is made. */
    private static void first(Producer producer, String topic, byte[] body) throws Exception {
        long end = System.currentTimeMillis() + 60_000;
        while (true) {
            try {
                producer.send(message(topic, body));
                return;
            } catch (Exception e) {
                if (System.currentTimeMillis() > end) {
                    throw e;
                }
            }
            Thread.sleep(100);
        }
    }

    /** {sends acknowledged, errors, nanoseconds}. */
    private static long[] run(Producer producer, String topic, byte[] body, double seconds, int window)
        throws InterruptedException {
        if (seconds <= 0) {
            return new long[] {0, 0, 0};
        }
        Semaphore slots = new Semaphore(window);
        AtomicLong ok = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        long started = System.nanoTime();
        long deadline = started + (long) (seconds * 1e9);
        while (System.nanoTime() < deadline) {
            slots.acquire();
            try {
                producer.sendAsync(message(topic, body)).whenComplete((receipt, e) -> {
                    if (e == null) {
                        ok.incrementAndGet();
                    } else if (errors.incrementAndGet() <= 3) {
                        System.err.println("send failed: " + e);
                    }
                    slots.release();
                });
            } catch (RuntimeException e) {
                errors.incrementAndGet();
                slots.release();
            }
        }
        slots.acquire(window);  // the last sends in flight answered
        return new long[] {ok.get(), errors.get(), System.nanoTime() - started};
    }

    private static Message message(String topic, byte[] body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setBody(body).build();
    }

    /** CPU nanoseconds of this JVM, all threads. */
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
            .getOperatingSystemMXBean()).getProcessCpuTime();
    }
}
