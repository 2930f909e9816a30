package org.nettyrdma.tools.doctor;

import java.util.List;
import java.util.stream.Collectors;

/** The report for people: the devices with their ports and GIDs, the process's limits, then every finding. */
final class TextReport {
    private TextReport() {
    }

    static String render(Report r) {
        Facts f = r.facts();
        StringBuilder b = new StringBuilder();
        b.append("netty-rdma doctor\n\nRDMA devices\n");
        if (f.devices().isEmpty()) {
            b.append("  none\n");
        }
        for (Device d : f.devices()) {
            b.append("  ").append(d.name()).append("  ").append(d.transport())
                    .append(d.description() != null ? ", " + d.description() : "")
                    .append(", /dev/infiniband/").append(d.uverbsNode() != null ? d.uverbsNode() : "? (no uverbs)")
                    .append('\n');
            for (Port p : d.ports()) {
                b.append("    port ").append(p.number()).append(": ").append(p.state()).append(" (")
                        .append(p.physState()).append("), ").append(p.linkLayer())
                        .append(p.netdev() != null ? ", netdev " + p.netdev() : "");
                List<String> ips = p.netdev() == null ? List.of() : f.netdevs().addresses(p.netdev());
                if (!ips.isEmpty()) {
                    b.append(" ").append(String.join(" ", ips));
                }
                b.append('\n');
                for (Gid g : p.gids()) {
                    b.append("      gid ").append(g.index()).append("  ").append(g.gid()).append("  ")
                            .append(g.type() != null ? g.type() : "?")
                            .append(g.ip() != null ? "  " + g.ip() : "").append('\n');
                }
            }
        }
        b.append("\nProcess\n");
        b.append("  provider: ").append(f.provider()).append('\n');
        b.append("  memlock: ").append(f.memlock() == null ? "unknown" : Bytes.format(f.memlock().soft()) + " (hard "
                + Bytes.format(f.memlock().hard()) + ")").append('\n');
        b.append("  CAP_IPC_LOCK: ").append(f.capIpcLock() ? "yes" : "no").append('\n');
        b.append("  /dev/infiniband: ").append(f.verdict().devInfiniband() ? String.join(" ", f.verdict().devNodes())
                : "missing").append('\n');
        if (f.need() != null) {
            b.append("  registered memory needed: ").append(Bytes.format(f.need().totalBytes())).append(" (")
                    .append(MemlockChecks.describe(f.need())).append(")\n");
        }
        b.append("\nChecks\n");
        for (Finding x : r.findings()) {
            b.append("  ").append(String.format("%-8s", x.status())).append(x.check()).append(": ")
                    .append(x.message()).append('\n');
            if (x.fix() != null) {
                b.append("          fix: ").append(x.fix()).append('\n');
            }
        }
        String attention = r.findings().stream().filter(x -> x.status() != Finding.Status.OK)
                .map(Finding::check).distinct().collect(Collectors.joining(", "));
        b.append('\n').append(r.problems() == 0 ? "OK" : r.problems() + " problem(s)")
                .append(r.warnings() > 0 ? ", " + r.warnings() + " warning(s)" : "")
                .append(attention.isEmpty() ? ": nothing to fix" : ": " + attention).append('\n');
        return b.toString();
    }
}
