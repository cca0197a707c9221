package orbitmq.remoting;

import java.util.ArrayList;
import java.util.List;

/**
 * Runs scenarios of the Remoting client (rocketmq-client 4.9.8 or 5.5.0) against OrbitMQ's
 * NameServer and brokers, as tests/interop/java/test_java_remoting.py asks.
 *
 * <p>Arguments: phases separated by "==", each phase scenarios separated by "--", each scenario
 * {@code <scenario> <id> key=value...}. The scenarios of a phase run at once, one thread each;
 * phases run one after the other. Every line a scenario prints starts with its id; its last line
 * is {@code <id> OK} or {@code <id> FAIL}.
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) throws Exception {
        List<List<List<String>>> phases = new ArrayList<>();
        List<List<String>> phase = new ArrayList<>();
        List<String> scenario = new ArrayList<>();
        for (String arg : args) {
            if (arg.equals("--") || arg.equals("==")) {
                if (!scenario.isEmpty()) {
                    phase.add(scenario);
                }
                scenario = new ArrayList<>();
                if (arg.equals("==")) {
                    phases.add(phase);
                    phase = new ArrayList<>();
                }
            } else {
                scenario.add(arg);
            }
        }
        if (!scenario.isEmpty()) {
            phase.add(scenario);
        }
        phases.add(phase);
        for (List<List<String>> p : phases) {
            List<Thread> threads = new ArrayList<>();
            for (List<String> s : p) {
                Ctx ctx = new Ctx(s.get(1), s.subList(2, s.size()));
                Thread t = new Thread(() -> Scenarios.run(s.get(0), ctx), "scenario-" + ctx.id);
                t.start();
                threads.add(t);
            }
            for (Thread t : threads) {
                t.join();
            }
        }
        System.out.flush();
        // The clients' own non-daemon threads (timers, Netty) must not keep the JVM up.
        Runtime.getRuntime().halt(0);
    }
}
