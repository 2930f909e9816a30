package org.nettyrdma.tools.doctor;

import io.netty.util.NettyRuntime;
import org.nettyrdma.channel.RdmaSocketChannel;
import org.nettyrdma.channel.RdmaSocketChannelConfig;

/**
 * The doctor's command line: {@code [--json] [--address IP] [--connections N] [--event-loops N]
 * [--receive-buffer-size BYTES] [--receive-buffer-count N] [--quick]}. The receive buffers default to
 * {@link RdmaSocketChannelConfig}'s defaults, the event loops to Netty's default group size.
 */
record DoctorOptions(boolean json, String address, int connections, int eventLoops, int receiveBufferSize,
                     int receiveBufferCount, boolean quick, boolean help) {

    static final int DEFAULT_CONNECTIONS = 64;

    static final String USAGE = """
            usage: doctor [--json] [--address IP] [--connections N] [--event-loops N]
                          [--receive-buffer-size BYTES] [--receive-buffer-count N] [--quick]
              What RDMA needs here and what is missing, with the fix: the RDMA devices, their ports, link layer and
              state, GIDs and RoCE version per netdev and IP; /dev/infiniband and rdma_cm; the memlock limit against
              the registered memory of this configuration; CAP_IPC_LOCK; which provider the transport picks and why.
              --json                  the report as JSON
              --address IP            the IP the application binds or connects to: checks that an RDMA device has it
              --connections N         connections the process holds at once (memlock estimate), default 64
              --event-loops N         RDMA event loops, default Netty's: 2 x CPUs
              --receive-buffer-size   RECEIVE_BUFFER_SIZE of the channels (default: the transport's)
              --receive-buffer-count  RECEIVE_BUFFER_COUNT of the channels (default: the transport's)
              --quick                 no measured estimate: check the memlock limit against the transport's minimum
            exit code: 0 no problem (warnings may be printed), 1 problems, 2 bad arguments""";

    static DoctorOptions parse(String... args) {
        RdmaSocketChannelConfig defaults = new RdmaSocketChannel().config();
        boolean json = false;
        boolean quick = false;
        boolean help = false;
        String address = null;
        int connections = DEFAULT_CONNECTIONS;
        int loops = NettyRuntime.availableProcessors() * 2;
        int size = defaults.getRdmaReceiveBufferSize();
        int count = defaults.getRdmaReceiveBufferCount();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--json" -> json = true;
                case "--quick" -> quick = true;
                case "-h", "--help" -> help = true;
                case "--address" -> address = value(args, ++i, a);
                case "--connections" -> connections = positive(args, ++i, a);
                case "--event-loops" -> loops = positive(args, ++i, a);
                case "--receive-buffer-size" -> size = positive(args, ++i, a);
                case "--receive-buffer-count" -> count = positive(args, ++i, a);
                default -> throw new IllegalArgumentException("unknown argument: " + a);
            }
        }
        // the channel's own checks of the ranges
        defaults.setRdmaReceiveBufferSize(size).setRdmaReceiveBufferCount(count);
        return new DoctorOptions(json, address, connections, loops, size, count, quick, help);
    }

    private static String value(String[] args, int i, String name) {
        if (i >= args.length) {
            throw new IllegalArgumentException(name + " needs a value");
        }
        return args[i];
    }

    private static int positive(String[] args, int i, String name) {
        String v = value(args, i, name);
        try {
            int n = Integer.parseInt(v);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // below
        }
        throw new IllegalArgumentException(name + ": " + v + " (expected a positive number)");
    }
}
