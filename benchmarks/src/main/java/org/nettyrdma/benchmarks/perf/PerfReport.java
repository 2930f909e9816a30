package org.nettyrdma.benchmarks.perf;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/** The results as an aligned table, as CSV, and as an SVG plot (hand-written, no dependencies). */
final class PerfReport {
    static final String CSV_HEADER = "transport,mode,size_bytes,connections,iterations,seconds,min_us,p50_us,p99_us,"
            + "p999_us,max_us,mb_per_s,msgs_per_s,cpu_s_per_gb,alloc_b_per_msg,allocator,verified,status,"
            + "copied_pct,ring_pct,rendezvous_pct";

    private PerfReport() {
    }

    static String size(int bytes) {
        if (bytes >= 1 << 20 && bytes % (1 << 20) == 0) {
            return (bytes >> 20) + " MiB";
        }
        if (bytes >= 1024 && bytes % 1024 == 0) {
            return (bytes >> 10) + " KiB";
        }
        return bytes + " B";
    }

    static String progressLine(PerfResult r) {
        if (!r.ok()) {
            return String.format(Locale.ROOT, "%s %s %s: %s", r.transport, r.mode, size(r.size), r.status);
        }
        if (r.latency()) {
            return String.format(Locale.ROOT, "%s latency %s: p50 %.1f µs, p99 %.1f µs (%d round trips)",
                    r.transport, size(r.size), r.p50Ns / 1e3, r.p99Ns / 1e3, r.iterations * r.connections);
        }
        return String.format(Locale.ROOT, "%s bandwidth %s: %.1f MB/s (%d messages)", r.transport, size(r.size),
                r.megabytesPerSecond, r.iterations * r.connections);
    }

    /**
     * @param bothEnds whether server and client ran in this process (the CPU and allocation figures cover both)
     */
    static void printTables(PrintStream out, List<PerfResult> results, String baseline, boolean bothEnds) {
        int width = 17;
        for (PerfResult r : results) {
            width = Math.max(width, r.transport.length());
        }
        String t = "%-" + width + "s";
        List<PerfResult> latency = new ArrayList<>();
        List<PerfResult> bandwidth = new ArrayList<>();
        List<PerfResult> other = new ArrayList<>();
        for (PerfResult r : results) {
            (PerfResult.LATENCY.equals(r.mode) ? latency : PerfResult.BANDWIDTH.equals(r.mode) ? bandwidth : other)
                    .add(r);
        }
        if (!latency.isEmpty()) {
            out.println();
            out.println("latency: round trip of a message and the server's reply of the same size, µs");
            out.printf(Locale.ROOT, t + " %8s %5s %9s %8s %8s %8s %8s %8s %11s%n", "transport", "size", "conns",
                    "iters", "min", "p50", "p99", "p99.9", "max", "alloc B/msg");
            for (PerfResult r : latency) {
                if (r.ok()) {
                    out.printf(Locale.ROOT, t + " %8s %5d %9d %8.1f %8.1f %8.1f %8.1f %8.1f %11s%n", r.transport,
                            size(r.size), r.connections, r.iterations, r.minNs / 1e3, r.p50Ns / 1e3, r.p99Ns / 1e3,
                            r.p999Ns / 1e3, r.maxNs / 1e3, number(r.allocatedBytesPerMessage, 1));
                } else {
                    out.printf(Locale.ROOT, t + " %8s %5d  %s%n", r.transport, size(r.size), r.connections, r.status);
                }
            }
        }
        if (!bandwidth.isEmpty()) {
            out.println();
            out.println("bandwidth: messages streamed one way, 10^6 payload bytes/s (all connections)");
            out.printf(Locale.ROOT, t + " %8s %5s %11s %9s %11s %9s %11s%n", "transport", "size", "conns",
                    "msgs/conn", "MB/s", "msg/s", "CPU s/GB", "alloc B/msg");
            for (PerfResult r : bandwidth) {
                if (r.ok()) {
                    out.printf(Locale.ROOT, t + " %8s %5d %11d %9.1f %11.0f %9s %11s%n", r.transport, size(r.size),
                            r.connections, r.iterations, r.megabytesPerSecond, r.messagesPerSecond,
                            number(r.cpuSecondsPerGigabyte, 2), number(r.allocatedBytesPerMessage, 1));
                } else {
                    out.printf(Locale.ROOT, t + " %8s %5d  %s%n", r.transport, size(r.size), r.connections, r.status);
                }
            }
        }
        for (PerfResult r : other) {
            out.printf(Locale.ROOT, t + " %s%n", r.transport, r.status);
        }
        printRegistered(out, results, t, bothEnds);
        printPaths(out, results, t);
        if (baseline != null) {
            printRatios(out, results, baseline, t);
        }
        Map<String, String> allocators = new LinkedHashMap<>();
        for (PerfResult r : results) {
            if (!r.allocator.isEmpty()) {
                allocators.putIfAbsent(r.transport, r.allocator);
            }
        }
        out.println();
        out.println("checked: " + (results.stream().anyMatch(r -> r.verified.contains("content"))
                ? "byte counts and every byte (--verify)" : "byte counts (--verify also checks every byte)"));
        if (!allocators.isEmpty()) {
            StringBuilder sb = new StringBuilder("allocators: ");
            allocators.forEach((k, v) -> sb.append(k).append(": ").append(v).append("; "));
            out.println(sb.substring(0, sb.length() - 2));
        }
        String ends = bothEnds ? "server and client" : "the client only";
        out.println("CPU s/GB: CPU time of this process (" + ends + ") per 10^9 payload bytes; alloc B/msg: bytes"
                + " allocated on");
        out.println("  this process's event loop threads (" + ends + ") per message sent either way (a round trip"
                + " is two messages)");
    }

    /** RDMA rows: registered memory per connection, idle (once connected) and the most while the row ran. */
    private static void printRegistered(PrintStream out, List<PerfResult> results, String t, boolean bothEnds) {
        boolean header = false;
        for (PerfResult r : results) {
            if (!r.ok() || Double.isNaN(r.registeredIdleBytesPerConnection)) {
                continue;
            }
            if (!header) {
                out.println();
                out.println("registered memory per connection, KiB (" + (bothEnds ? "both ends" : "the client end")
                        + "): idle once connected, and the most while the row ran");
                out.printf(Locale.ROOT, t + " %9s %5s %9s %9s%n", "transport", "mode", "size", "idle", "active");
                header = true;
            }
            out.printf(Locale.ROOT, t + " %9s %5s %9.1f %9.1f%n", r.transport, r.mode, size(r.size),
                    r.registeredIdleBytesPerConnection / 1024, r.registeredActiveBytesPerConnection / 1024);
        }
    }

    /** RDMA rows: how the client's bytes went (SendPaths). */
    private static void printPaths(PrintStream out, List<PerfResult> results, String t) {
        boolean header = false;
        for (PerfResult r : results) {
            if (!r.ok() || Double.isNaN(r.copiedPercent)) {
                continue;
            }
            if (!header) {
                out.println();
                out.println("the client's bytes by path, %: copied into staging, placed in the peer's WRITE ring,"
                        + " read by the peer (READ rendezvous); the rest are SENDs from registered buffers");
                out.printf(Locale.ROOT, t + " %9s %9s %7s %7s %10s%n", "transport", "mode", "size", "copied", "ring",
                        "rendezvous");
                header = true;
            }
            out.printf(Locale.ROOT, t + " %9s %9s %7.1f %7.1f %10.1f%n", r.transport, r.mode, size(r.size),
                    r.copiedPercent, r.ringPercent, r.rendezvousPercent);
        }
    }

    private static void printRatios(PrintStream out, List<PerfResult> results, String baseline, String t) {
        Map<String, PerfResult> base = new LinkedHashMap<>();
        String baseLabel = null;
        for (PerfResult r : results) {
            if (r.ok() && transportName(r.transport).equals(baseline)) {
                base.put(r.mode + r.size, r);
                baseLabel = r.transport;
            }
        }
        out.println();
        if (baseLabel == null) {
            out.println("ratios: no results of the baseline " + baseline);
            return;
        }
        out.println("ratios to " + baseLabel + ": latency (lower is better), bandwidth (higher is better)");
        out.printf(Locale.ROOT, t + " %8s %9s %9s %9s%n", "transport", "size", "p50 ×", "p99 ×", "MB/s ×");
        Map<String, Map<Integer, double[]>> rows = new LinkedHashMap<>();
        for (PerfResult r : results) {
            PerfResult b = base.get(r.mode + r.size);
            if (!r.ok() || b == null || r.transport.equals(baseLabel)) {
                continue;
            }
            double[] row = rows.computeIfAbsent(r.transport, k -> new LinkedHashMap<>())
                    .computeIfAbsent(r.size, k -> new double[] {Double.NaN, Double.NaN, Double.NaN});
            if (r.latency()) {
                row[0] = r.p50Ns / b.p50Ns;
                row[1] = r.p99Ns / b.p99Ns;
            } else {
                row[2] = r.megabytesPerSecond / b.megabytesPerSecond;
            }
        }
        rows.forEach((transport, bySize) -> new TreeSet<>(bySize.keySet()).forEach(size -> {
            double[] row = bySize.get(size);
            out.printf(Locale.ROOT, t + " %8s %9s %9s %9s%n", transport, size(size), number(row[0], 2),
                    number(row[1], 2), number(row[2], 2));
        }));
    }

    /** "rdma" of "rdma (emulated)". */
    static String transportName(String label) {
        int space = label.indexOf(' ');
        return space < 0 ? label : label.substring(0, space);
    }

    private static String number(double v, int decimals) {
        return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%." + decimals + "f", v);
    }

    // CSV

    static void writeCsv(Path file, List<PerfResult> results) throws IOException {
        StringBuilder sb = new StringBuilder(CSV_HEADER).append('\n');
        for (PerfResult r : results) {
            sb.append(csv(r.transport)).append(',').append(r.mode).append(',').append(r.size).append(',')
                    .append(r.connections).append(',').append(r.iterations).append(',')
                    .append(csvNumber(r.seconds, 6)).append(',')
                    .append(csvNumber(r.minNs / 1e3, 3)).append(',').append(csvNumber(r.p50Ns / 1e3, 3)).append(',')
                    .append(csvNumber(r.p99Ns / 1e3, 3)).append(',').append(csvNumber(r.p999Ns / 1e3, 3)).append(',')
                    .append(csvNumber(r.maxNs / 1e3, 3)).append(',').append(csvNumber(r.megabytesPerSecond, 3))
                    .append(',').append(csvNumber(r.messagesPerSecond, 1)).append(',')
                    .append(csvNumber(r.cpuSecondsPerGigabyte, 4)).append(',')
                    .append(csvNumber(r.allocatedBytesPerMessage, 3)).append(',').append(csv(r.allocator))
                    .append(',').append(r.verified).append(',').append(csv(r.status)).append(',')
                    .append(csvNumber(r.copiedPercent, 1)).append(',').append(csvNumber(r.ringPercent, 1)).append(',')
                    .append(csvNumber(r.rendezvousPercent, 1)).append('\n');
        }
        writeFile(file, sb.toString());
    }

    private static String csvNumber(double v, int decimals) {
        return Double.isNaN(v) ? "" : String.format(Locale.ROOT, "%." + decimals + "f", v);
    }

    private static String csv(String s) {
        return s.indexOf(',') < 0 && s.indexOf('"') < 0 && s.indexOf('\n') < 0 ? s
                : '"' + s.replace("\"", "\"\"") + '"';
    }

    private static void writeFile(Path file, String text) throws IOException {
        Path parent = file.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        Files.write(file, text.getBytes(StandardCharsets.UTF_8));
    }

    // SVG

    private static final int PANEL_WIDTH = 460;
    private static final int PLOT_LEFT = 70;
    private static final int PLOT_TOP = 80;
    private static final int LEGEND_COLUMNS = 4;
    private static final int PLOT_WIDTH = 360;
    private static final int PLOT_HEIGHT = 280;
    private static final int LEGEND_TOP = PLOT_TOP + PLOT_HEIGHT + 55;

    /** Latency p50 and bandwidth against message size, log-log, one line per transport. */
    static void writeSvg(Path file, List<PerfResult> results, String subtitle) throws IOException {
        List<String> transports = new ArrayList<>();
        for (PerfResult r : results) {
            if (r.ok() && !transports.contains(r.transport)) {
                transports.add(r.transport);
            }
        }
        int width = 2 * PANEL_WIDTH + 20;
        int height = LEGEND_TOP + 20 * ((transports.size() + LEGEND_COLUMNS - 1) / LEGEND_COLUMNS) + 10;
        StringBuilder svg = new StringBuilder();
        svg.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        svg.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\""
                + " viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">%n", width, height, width,
                height));
        svg.append("<title>netty-rdma perf: latency and bandwidth against message size</title>\n");
        svg.append(String.format(Locale.ROOT, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>%n", width, height));
        // the subtitle in lines of at most ~140 characters, broken after "; "
        int line = 0;
        StringBuilder text = new StringBuilder();
        for (String part : subtitle.split("; ")) {
            if (text.length() > 0 && text.length() + part.length() > 140) {
                svg.append(String.format(Locale.ROOT, "<text x=\"10\" y=\"%d\" font-size=\"11\" fill=\"#444\">%s"
                        + "</text>%n", 16 + 14 * line++, xml(text.toString())));
                text.setLength(0);
            }
            text.append(text.length() > 0 ? "; " : "").append(part);
        }
        svg.append(String.format(Locale.ROOT, "<text x=\"10\" y=\"%d\" font-size=\"11\" fill=\"#444\">%s</text>%n",
                16 + 14 * line, xml(text.toString())));
        panel(svg, 10, results, transports, true);
        panel(svg, 10 + PANEL_WIDTH + 10, results, transports, false);
        for (int i = 0; i < transports.size(); i++) {
            int x = 10 + PLOT_LEFT + (i % LEGEND_COLUMNS) * 200;
            int y = LEGEND_TOP + 20 * (i / LEGEND_COLUMNS);
            String colour = colour(transports.get(i), i);
            svg.append(String.format(Locale.ROOT, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\""
                    + " stroke-width=\"2\"/>%n", x, y - 4, x + 24, y - 4, colour));
            svg.append(String.format(Locale.ROOT, "<circle cx=\"%d\" cy=\"%d\" r=\"3\" fill=\"%s\"/>%n", x + 12,
                    y - 4, colour));
            svg.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\">%s</text>%n", x + 30, y,
                    xml(transports.get(i))));
        }
        svg.append("</svg>\n");
        writeFile(file, svg.toString());
    }

    private static void panel(StringBuilder svg, int x0, List<PerfResult> results, List<String> transports,
                              boolean latency) {
        List<PerfResult> rows = new ArrayList<>();
        for (PerfResult r : results) {
            if (r.ok() && r.latency() == latency && !r.mode.isEmpty()) {
                rows.add(r);
            }
        }
        int left = x0 + PLOT_LEFT;
        int top = PLOT_TOP;
        svg.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">%s"
                + "</text>%n", left, top - 30, latency ? "Latency: round trip p50 (µs)" : "Bandwidth (MB/s)"));
        svg.append(String.format(Locale.ROOT, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\""
                + " stroke=\"#888\"/>%n", left, top, PLOT_WIDTH, PLOT_HEIGHT));
        svg.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">message size"
                + "</text>%n", left + PLOT_WIDTH / 2, top + PLOT_HEIGHT + 36));
        if (rows.isEmpty()) {
            svg.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#888\">"
                    + "not measured</text>%n", left + PLOT_WIDTH / 2, top + PLOT_HEIGHT / 2));
            return;
        }
        int minExp = Integer.MAX_VALUE;
        int maxExp = Integer.MIN_VALUE;
        double minY = Double.MAX_VALUE;
        double maxY = 0;
        for (PerfResult r : rows) {
            double e = log2(r.size);
            minExp = Math.min(minExp, (int) Math.floor(e));
            maxExp = Math.max(maxExp, (int) Math.ceil(e));
            double y = value(r, latency);
            minY = Math.min(minY, y);
            maxY = Math.max(maxY, y);
        }
        if (minExp == maxExp) {
            minExp--;
            maxExp++;
        }
        int minDecade = (int) Math.floor(Math.log10(minY));
        int maxDecade = (int) Math.ceil(Math.log10(maxY));
        if (minDecade == maxDecade) {
            maxDecade++;
        }
        double xFrom = minExp;
        double xTo = maxExp;
        double yFrom = minDecade;
        double yTo = maxDecade;
        // x: powers of two; labels at the sizes measured, or at every k-th power when there are many
        TreeSet<Integer> measured = new TreeSet<>();
        for (PerfResult r : rows) {
            if (Integer.bitCount(r.size) == 1) {
                measured.add(Integer.numberOfTrailingZeros(r.size));
            }
        }
        int step = Math.max(1, (int) Math.ceil((maxExp - minExp + 1) / 7.0));
        boolean labelMeasured = !measured.isEmpty() && measured.size() <= 8;
        for (int e = minExp; e <= maxExp; e++) {
            double x = left + (e - xFrom) / (xTo - xFrom) * PLOT_WIDTH;
            boolean label = labelMeasured ? measured.contains(e) : (e - minExp) % step == 0;
            svg.append(String.format(Locale.ROOT, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>%n",
                    x, top, x, top + PLOT_HEIGHT, label ? "#ddd" : "#f0f0f0"));
            if (label) {
                svg.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>%n",
                        x, top + PLOT_HEIGHT + 16, size(1 << e)));
            }
        }
        // y: decades, with light lines at 2 and 5
        for (int d = minDecade; d <= maxDecade; d++) {
            for (int m : new int[] {1, 2, 5}) {
                double v = Math.log10(m) + d;
                if (v > yTo) {
                    break;
                }
                double y = top + PLOT_HEIGHT - (v - yFrom) / (yTo - yFrom) * PLOT_HEIGHT;
                svg.append(String.format(Locale.ROOT, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\""
                        + " stroke=\"%s\"/>%n", left, y, left + PLOT_WIDTH, y, m == 1 ? "#ddd" : "#f0f0f0"));
                if (m == 1 || maxDecade - minDecade <= 2) {
                    svg.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>%n",
                            left - 6, y + 4, axisNumber(m * Math.pow(10, d))));
                }
            }
        }
        for (int i = 0; i < transports.size(); i++) {
            String transport = transports.get(i);
            StringBuilder points = new StringBuilder();
            StringBuilder dots = new StringBuilder();
            rows.stream().filter(r -> r.transport.equals(transport)).sorted((a, b) -> Integer.compare(a.size, b.size))
                    .forEach(r -> {
                        double x = left + (log2(r.size) - xFrom) / (xTo - xFrom) * PLOT_WIDTH;
                        double y = top + PLOT_HEIGHT - (Math.log10(value(r, latency)) - yFrom) / (yTo - yFrom)
                                * PLOT_HEIGHT;
                        points.append(String.format(Locale.ROOT, "%.1f,%.1f ", x, y));
                        dots.append(String.format(Locale.ROOT, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>", x, y));
                    });
            if (points.length() == 0) {
                continue;
            }
            String colour = colour(transport, i);
            svg.append(String.format(Locale.ROOT, "<g fill=\"%s\" stroke=\"%s\"><title>%s</title>%n", colour,
                    colour, xml(transport)));
            svg.append(String.format(Locale.ROOT, "<polyline points=\"%s\" fill=\"none\" stroke-width=\"2\"/>%n",
                    points.toString().trim()));
            svg.append(dots).append("\n</g>\n");
        }
    }

    private static double value(PerfResult r, boolean latency) {
        return Math.max(1e-3, latency ? r.p50Ns / 1e3 : r.megabytesPerSecond);
    }

    private static double log2(int v) {
        return Math.log(v) / Math.log(2);
    }

    private static String axisNumber(double v) {
        if (v >= 1e5 || v < 1e-2) {
            return String.format(Locale.ROOT, "1e%d", (int) Math.round(Math.log10(v)));
        }
        return v >= 1 ? String.format(Locale.ROOT, "%.0f", v) : String.format(Locale.ROOT, "%.2g", v);
    }

    private static String colour(String transport, int index) {
        switch (transportName(transport)) {
            case PerfTransport.RDMA:
                return "#d62728";
            case PerfTransport.EPOLL:
                return "#1f77b4";
            case PerfTransport.NIO:
                return "#2ca02c";
            case PerfTransport.LOCAL:
                return "#9467bd";
            default:
                String[] others = {"#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"};
                return others[index % others.length];
        }
    }

    private static String xml(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }
}
