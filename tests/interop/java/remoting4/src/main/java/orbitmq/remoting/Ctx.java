package orbitmq.remoting;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;

/** One scenario's arguments, its output lines (prefixed by its id) and its barriers. */
final class Ctx {
    final String id;
    private final Map<String, String> args = new HashMap<>();

    Ctx(String id, List<String> kv) {
        this.id = id;
        for (String a : kv) {
            int eq = a.indexOf('=');
            args.put(a.substring(0, eq), a.substring(eq + 1));
        }
    }

    String arg(String key) {
        String v = args.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing argument " + key);
        }
        return v;
    }

    String arg(String key, String fallback) {
        return args.getOrDefault(key, fallback);
    }

    int num(String key, int fallback) {
        return Integer.parseInt(arg(key, String.valueOf(fallback)));
    }

    void out(String line) {
        synchronized (System.out) {
            System.out.println(id + " " + line);
            System.out.flush();
        }
    }

    /** Prints "WAIT name" and blocks until the test creates the file {@code <barriers>/<id>.<name>}. */
    void barrier(String name) throws InterruptedException {
        Path go = Paths.get(arg("barriers"), id + "." + name);
        out("WAIT " + name);
        long end = System.currentTimeMillis() + 120_000;
        while (!Files.exists(go)) {
            if (System.currentTimeMillis() > end) {
                throw new IllegalStateException("barrier " + name + " never opened");
            }
            Thread.sleep(50);
        }
    }

    /** Waits until {@code done} holds, or fails after {@code ms} with {@code what}. */
    static void await(BooleanSupplier done, long ms, String what) throws InterruptedException {
        long end = System.currentTimeMillis() + ms;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > end) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            Thread.sleep(50);
        }
    }
}
