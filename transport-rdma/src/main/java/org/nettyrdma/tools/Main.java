package org.nettyrdma.tools;

import java.util.Arrays;

/**
 * The transport jar's Main-Class: {@code java -jar netty-rdma-transport.jar doctor [options]}. The jar holds the
 * transport only, so Netty must be on the class path: that is, the class runs from a class path ({@code java -cp
 * netty-rdma-transport.jar:<netty jars> org.nettyrdma.tools.Main doctor}), or from a jar that holds both, as the
 * examples jar does ({@code java -cp netty-rdma-examples.jar org.nettyrdma.tools.Main doctor}).
 */
public final class Main {
    private static final String USAGE = "usage: java -jar netty-rdma-transport.jar doctor [--help | options]";

    private Main() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || !args[0].equals("doctor")) {
            System.err.println(USAGE);
            System.exit(2);
        }
        try {
            Class.forName("io.netty.channel.Channel", false, Main.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            System.err.println("doctor: Netty is not on the class path; run it from a class path with Netty 4.2 "
                    + "(java -cp netty-rdma-transport.jar:<netty jars> org.nettyrdma.tools.Main doctor) or from the "
                    + "examples jar (java -cp netty-rdma-examples.jar org.nettyrdma.tools.Main doctor)");
            System.exit(2);
        }
        org.nettyrdma.tools.doctor.Doctor.main(Arrays.copyOfRange(args, 1, args.length));
    }
}
