package org.nettyrdma.shuffle;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A {@link BlockServerMain} in a JVM of its own (this JVM's class path and {@code java}), as a shuffle service runs
 * beside the executors: where the tests run on native RDMA, several services are several processes, and a service
 * killed mid-fetch is a process killed with SIGKILL.
 */
final class ServerProcess implements AutoCloseable {
    private final Process process;
    private final InetSocketAddress address;

    private ServerProcess(Process process, InetSocketAddress address) {
        this.process = process;
        this.address = address;
    }

    /**
     * Starts a service's JVM and returns at once; {@link Launched#listening()} waits until it listens (several JVMs
     * then start side by side: each takes some 10 s in the VM).
     */
    static Launched launch(String transport, String host, List<String> args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(new File(System.getProperty("java.home"), "bin/java").getPath());
        // as the VM's runners: C1 only (the guest's emulated CPU)
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-XX:+UseSerialGC");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(BlockServerMain.class.getName());
        command.add(transport);
        command.add(host);
        command.add("0");
        command.addAll(args);
        Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<String> listening = CompletableFuture.supplyAsync(() -> {
            try {
                for (String line; (line = out.readLine()) != null; ) {
                    if (line.startsWith("LISTENING ")) {
                        return line.substring("LISTENING ".length());
                    }
                }
                return null;
            } catch (IOException e) {
                return null;
            }
        });
        return new Launched(p, listening, command);
    }

    /** A service's JVM started, not yet known to listen. */
    static final class Launched {
        private final Process process;
        private final CompletableFuture<String> listening;
        private final List<String> command;

        private Launched(Process process, CompletableFuture<String> listening, List<String> command) {
            this.process = process;
            this.listening = listening;
            this.command = command;
        }

        /** Waits (up to 120 s) until the service listens; kills it and throws if it does not. */
        ServerProcess listening() throws IOException, InterruptedException {
            String hostPort;
            try {
                hostPort = listening.get(120, TimeUnit.SECONDS);
            } catch (ExecutionException | TimeoutException e) {
                hostPort = null;
            }
            if (hostPort == null) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                throw new IOException("the shuffle service process did not start listening (exit "
                        + (process.isAlive() ? "-" : process.exitValue()) + "): " + command);
            }
            int colon = hostPort.lastIndexOf(':');
            return new ServerProcess(process, new InetSocketAddress(hostPort.substring(0, colon),
                    Integer.parseInt(hostPort.substring(colon + 1))));
        }

        /** Kills the JVM (a start that is given up). */
        void kill() throws InterruptedException {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }

    InetSocketAddress address() {
        return address;
    }

    /** SIGKILL: the process ends at once, its connections with it (the kernel tears its QPs down). */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            throw new AssertionError("the killed shuffle service process is still alive");
        }
    }

    /** Ends the service: its standard input closes, then it is killed if it is still there after 10 s. */
    @Override
    public void close() throws IOException, InterruptedException {
        if (process.isAlive()) {
            process.getOutputStream().close();
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                kill();
            }
        }
    }
}
