package org.nettyrdma.grpc;

import org.nettyrdma.testing.LeakRecorder;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The Echo server in a JVM of its own, for {@link EchoServerProcess} (native provider, address and provider from the
 * same system properties) and for vm/two-host's host 1; its one optional argument is the port (default 0: any). Prints {@code listening PORT}, then answers commands on its standard input, one a line:
 * {@code counts} (a {@link ResourceCounts} line), {@code shutdown} ({@code ok}), {@code shutdown-now} ({@code
 * terminated MS}), {@code terminated MS} ({@code true} or {@code false}: whether it terminated within MS). Ends at the
 * end of its input.
 */
public final class EchoServerMain {
    private EchoServerMain() {
    }

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        try (InProcessEchoServer server = InProcessEchoServer.start(port);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            System.out.println("listening " + server.address().getPort());
            System.out.flush();
            for (String line; (line = in.readLine()) != null; ) {
                String[] cmd = line.trim().split(" ");
                switch (cmd[0]) {
                    case "counts":
                        System.out.println(server.counts().format());
                        break;
                    case "shutdown":
                        server.shutdown();
                        System.out.println("ok");
                        break;
                    case "shutdown-now":
                        System.out.println("terminated " + server.shutdownNow());
                        break;
                    case "terminated":
                        System.out.println(server.awaitTermination(Long.parseLong(cmd[1])));
                        break;
                    default:
                        System.out.println("unknown command " + line);
                }
                System.out.flush();
            }
        }
        if (LeakRecorder.isInstalled()) {
            LeakRecorder.collectLeaks();
            List<LeakRecorder.Leak> leaks = LeakRecorder.takeLeaks();
            if (!leaks.isEmpty()) {
                System.out.println("the server leaked " + leaks.size() + " buffer(s): " + leaks);
                System.exit(1);
            }
        }
    }
}
