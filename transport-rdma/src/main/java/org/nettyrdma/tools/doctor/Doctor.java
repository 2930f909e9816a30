package org.nettyrdma.tools.doctor;

import org.nettyrdma.verbs.jni.HostRoot;
import org.nettyrdma.verbs.jni.NativeFacts;

import java.io.PrintStream;

/**
 * What an operator needs when "RDMA doesn't work in my pod": {@code java -cp <jar> org.nettyrdma.tools.doctor.Doctor
 * [--json] [--address IP] ...} (or {@code java -jar netty-rdma-transport.jar doctor} with Netty on the class path)
 * prints the RDMA devices, ports, GIDs, the device nodes, the memlock limit against what the configuration registers,
 * CAP_IPC_LOCK and the provider the transport would pick, each problem with its fix. Exit code 0 without problems, 1
 * with, 2 for bad arguments. {@link DoctorOptions#USAGE} lists the arguments.
 */
public final class Doctor {
    private Doctor() {
    }

    public static void main(String[] args) {
        System.exit(run(args, HostRoot.system(), NativeFacts.system(), Netdevs.system(), System.out, System.err));
    }

    /** Runs the doctor on the files under {@code root}; returns the exit code. */
    static int run(String[] args, HostRoot root, NativeFacts lib, Netdevs netdevs, PrintStream out, PrintStream err) {
        DoctorOptions options;
        try {
            options = DoctorOptions.parse(args);
        } catch (IllegalArgumentException e) {
            err.println("doctor: " + e.getMessage());
            err.println(DoctorOptions.USAGE);
            return 2;
        }
        if (options.help()) {
            out.println(DoctorOptions.USAGE);
            return 0;
        }
        Report report = Report.of(new FactsCollector(root, lib, netdevs).collect(options));
        out.print(options.json() ? JsonReport.render(report) : TextReport.render(report));
        out.flush();
        return report.exitCode();
    }
}
