package orbitmq.interop.mqadmin;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.commons.cli.CommandLine;
import org.apache.commons.cli.DefaultParser;
import org.apache.commons.cli.Options;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.srvutil.ServerUtil;
import org.apache.rocketmq.tools.command.MQAdminStartup;
import org.apache.rocketmq.tools.command.SubCommand;

/**
 * Runs many mqadmin command lines in one JVM, one after another: a JVM start costs about a
 * second, a command a fraction of that. Each command's stdout and stderr are captured apart (a
 * failing command prints its stack trace on stderr, as MQAdminStartup#main0 does).
 *
 * <p>Usage: Batch FILE [accessKey secretKey]. FILE holds one command line per line: a JSON array
 * of arguments, the command name first as for mqadmin, or {@code {"args":[...],"limitMillis":N}}
 * for a command that runs until stopped. Prints one line per command, in FILE's order:
 * {@code RESULT {"args":[...],"out":"...","err":"...","ms":N,"stopped":false}}.
 */
public final class Batch extends MQAdminStartup {
    private static final long DEFAULT_LIMIT_MILLIS = 60_000;
    private static final long STOP_GRACE_MILLIS = 10_000;

    public static void main(String[] argv) {
        try {
            batch(argv);
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    private static void batch(String[] argv) throws Exception {
        RPCHook hook = argv.length >= 3 ? new AclClientRPCHook(new SessionCredentials(argv[1], argv[2])) : null;
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        initCommand();
        PrintStream stdout = System.out;
        PrintStream stderr = System.err;
        Thread[] runner = new Thread[1];
        Thread hurry = new Thread(() -> hurryShutdown(runner), "hurry-shutdown");
        hurry.setDaemon(true);
        hurry.start();
        for (String line : Files.readAllLines(Path.of(argv[0]), StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            JSONArray parsed;
            long limitMillis = DEFAULT_LIMIT_MILLIS;
            if (line.startsWith("{")) {
                JSONObject spec = JSON.parseObject(line);
                parsed = spec.getJSONArray("args");
                limitMillis = spec.getLongValue("limitMillis", DEFAULT_LIMIT_MILLIS);
            } else {
                parsed = JSON.parseArray(line);
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            long start = System.nanoTime();
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            Thread worker = new Thread(() -> {
                try {
                    execute(parsed.toArray(new String[0]), hook);
                } catch (Throwable t) {
                    t.printStackTrace();
                }
            }, "mqadmin-command");
            runner[0] = worker;
            worker.start();
            // Commands that repeat until stopped (clusterRT, getSyncStateSet -i ...) are
            // interrupted in their sleep after limitMillis.
            worker.join(limitMillis);
            boolean stopped = worker.isAlive();
            // An interrupt that lands in a send rather than the sleep is swallowed: repeat it.
            for (long waited = 0; worker.isAlive() && waited < STOP_GRACE_MILLIS; waited += 100) {
                worker.interrupt();
                worker.join(100);
            }
            System.out.flush();
            System.err.flush();
            System.setOut(stdout);
            System.setErr(stderr);
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("args", parsed);
            result.put("out", out.toString(StandardCharsets.UTF_8));
            result.put("err", err.toString(StandardCharsets.UTF_8));
            result.put("ms", (System.nanoTime() - start) / 1_000_000);
            result.put("stopped", stopped);
            stdout.println("RESULT " + JSON.toJSONString(result));
            stdout.flush();
        }
    }

    /**
     * What MQAdminStartup#main0 does for one command line, on the command list registered once
     * (main0 appends every command again on each call), with a parse error thrown rather than
     * exiting the JVM (ServerUtil#parseCmdLine).
     */
    private static void execute(String[] args, RPCHook hook) throws Exception {
        boolean help = args.length == 2 && args[0].equals("help");
        String name = help ? args[1] : args[0];
        SubCommand cmd = null;
        for (SubCommand candidate : SUB_COMMANDS) {
            if (candidate.commandName().equalsIgnoreCase(name)) {
                cmd = candidate;
                break;
            }
        }
        if (cmd == null) {
            System.out.printf("The sub command %s not exist.%n", name);
            return;
        }
        // A fresh instance per command line: some commands keep their client in a field
        // (SendMessageCommand's producer), shut down after the first run.
        cmd = cmd.getClass().getDeclaredConstructor().newInstance();
        Options options = cmd.buildCommandlineOptions(ServerUtil.buildCommandlineOptions(new Options()));
        if (help) {
            ServerUtil.printCommandLineHelp("mqadmin " + cmd.commandName(), options);
            return;
        }
        CommandLine line = new DefaultParser().parse(options, Arrays.copyOfRange(args, 1, args.length));
        if (line.hasOption('n')) {
            System.setProperty(MixAll.NAMESRV_ADDR_PROPERTY, line.getOptionValue('n'));
        }
        cmd.execute(line, options, hook);
    }

    /**
     * A client's shutdown joins its NettyEventExecutor, which only looks at its stop flag
     * between 3 s polls of its event queue (NettyRemotingAbstract$NettyEventExecutor#run): 3 s
     * per command that reached a broker. While the runner waits in ServiceThread#shutdown, wake
     * that thread (its loop logs the interrupt and sees it is stopped).
     */
    private static void hurryShutdown(Thread[] runner) {
        while (true) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
            Thread command = runner[0];
            if (command == null) {
                continue;
            }
            boolean joining = false;
            for (StackTraceElement frame : command.getStackTrace()) {
                if (frame.getClassName().equals("org.apache.rocketmq.common.ServiceThread")
                    && frame.getMethodName().equals("shutdown")) {
                    joining = true;
                    break;
                }
            }
            if (!joining) {
                continue;
            }
            for (Thread thread : Thread.getAllStackTraces().keySet()) {
                if (thread.getName().equals("NettyEventExecutor")) {
                    thread.interrupt();
                }
            }
        }
    }
}
