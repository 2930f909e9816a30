package org.nettyrdma.grpc;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The Echo server in a JVM of its own ({@link EchoServerMain}, this JVM's class path, provider, address and options):
 * the native provider's server and client in separate processes, as in production. Its output lines that answer
 * commands are queued; the rest (logging) is echoed here, prefixed.
 */
final class EchoServerProcess implements EchoServerUnderTest {
    private final Process process;
    private final PrintStream commands;
    private final BlockingQueue<String> answers = new LinkedBlockingQueue<>();
    private final List<String> log = Collections.synchronizedList(new ArrayList<>());
    private volatile int port = -1;

    private EchoServerProcess(Process process) {
        this.process = process;
        this.commands = new PrintStream(process.getOutputStream(), true, StandardCharsets.UTF_8);
        Thread reader = new Thread(this::readOutput, "echo-server-process-output");
        reader.setDaemon(true);
        reader.start();
    }

    static EchoServerProcess start() throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (a.startsWith("-D") || a.startsWith("-XX:") || a.startsWith("-Xcheck")) {
                command.add(a);
            }
        }
        command.add("-D" + GrpcTestSupport.PROVIDER_PROPERTY + "=" + GrpcTestSupport.provider());
        command.add("-D" + GrpcTestSupport.ADDRESS_PROPERTY + "=" + GrpcTestSupport.address());
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(EchoServerMain.class.getName());
        EchoServerProcess server = new EchoServerProcess(new ProcessBuilder(command).redirectErrorStream(true)
                .start());
        String first = server.answer("the server process to listen", 4 * GrpcTestSupport.promptMillis());
        if (!first.startsWith("listening ")) {
            server.close();
            throw new AssertionError("the server process said " + first + "; its output: " + server.log);
        }
        server.port = Integer.parseInt(first.substring("listening ".length()));
        return server;
    }

    private void readOutput() {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8))) {
            for (String line; (line = r.readLine()) != null; ) {
                if (line.startsWith("listening ") || line.startsWith("counts ") || line.startsWith("terminated ")
                        || line.equals("ok") || line.equals("true") || line.equals("false")
                        || line.startsWith("unknown command")) {
                    answers.add(line);
                } else {
                    log.add(line);
                    System.out.println("[echo server process] " + line);
                }
            }
        } catch (IOException e) {
            answers.add("(output ended: " + e + ")");
        }
        answers.add("(the server process ended)");
    }

    private String ask(String command, long timeoutMillis) throws InterruptedException {
        commands.println(command);
        return answer(command, timeoutMillis);
    }

    private String answer(String what, long timeoutMillis) throws InterruptedException {
        String line = answers.poll(timeoutMillis, TimeUnit.MILLISECONDS);
        if (line == null) {
            throw new AssertionError("no answer from the server process to " + what + " within " + timeoutMillis
                    + " ms; alive " + process.isAlive() + ", output " + log);
        }
        return line;
    }

    @Override
    public InetSocketAddress address() {
        return new InetSocketAddress(GrpcTestSupport.address(), port);
    }

    @Override
    public ResourceCounts counts() throws InterruptedException {
        return ResourceCounts.parse(ask("counts", GrpcTestSupport.promptMillis()));
    }

    @Override
    public long shutdownNow() throws InterruptedException {
        String a = ask("shutdown-now", 2 * GrpcTestSupport.promptMillis());
        if (!a.startsWith("terminated ")) {
            throw new AssertionError("shutdown-now: the server process said " + a + "; output " + log);
        }
        return Long.parseLong(a.substring("terminated ".length()));
    }

    @Override
    public void shutdown() throws InterruptedException {
        String a = ask("shutdown", GrpcTestSupport.promptMillis());
        if (!a.equals("ok")) {
            throw new AssertionError("shutdown: the server process said " + a + "; output " + log);
        }
    }

    @Override
    public boolean awaitTermination(long millis) throws InterruptedException {
        return Boolean.parseBoolean(ask("terminated " + millis, millis + GrpcTestSupport.promptMillis()));
    }

    @Override
    public void close() throws InterruptedException {
        commands.close(); // end of input: the server shuts down and exits
        if (!process.waitFor(GrpcTestSupport.promptMillis(), TimeUnit.MILLISECONDS)) {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            throw new AssertionError("the server process did not exit within " + GrpcTestSupport.promptMillis()
                    + " ms of the end of its input; output " + log);
        }
        if (process.exitValue() != 0) {
            throw new AssertionError("the server process exited with " + process.exitValue() + "; output " + log);
        }
    }
}
