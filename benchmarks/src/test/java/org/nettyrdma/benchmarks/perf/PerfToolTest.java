package org.nettyrdma.benchmarks.perf;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Document;

import javax.xml.parsers.DocumentBuilderFactory;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The perf tool end to end with tiny counts (figures are not checked, only that every row was measured and checked),
 * and its pieces. Leaks fail the class (the transport's LeakCheckExtension, auto-detected from its test jar).
 */
class PerfToolTest {
    @TempDir
    Path dir;

    @Test
    void measuresEveryTransportModeAndSizeAndWritesCsvAndSvg() throws Exception {
        Path csv = dir.resolve("out/perf.csv");
        Path svg = dir.resolve("out/perf.svg");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = PerfTool.run(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8),
                "--transports", "rdma,nio,local", "--provider", "emulated", "-s", "8,4K,64K", "-n", "20", "-w", "0",
                "-q", "2", "--verify", "--timeout", "10", "--csv", csv.toString(), "--svg", svg.toString(),
                "--baseline", "nio");
        String output = out.toString(StandardCharsets.UTF_8) + err.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, output);

        List<String> lines = Files.readAllLines(csv);
        assertEquals(PerfReport.CSV_HEADER, lines.get(0));
        assertEquals(1 + 3 * 2 * 3, lines.size(), String.join("\n", lines));
        for (String transport : new String[] {"rdma (emulated)", "nio", "local"}) {
            for (String mode : new String[] {"latency", "bandwidth"}) {
                for (int size : new int[] {8, 4096, 64 << 10}) {
                    String prefix = transport + ',' + mode + ',' + size + ",2,20,";
                    String row = lines.stream().filter(l -> l.startsWith(prefix)).findFirst().orElse(null);
                    assertTrue(row != null, "no row " + prefix + " in\n" + String.join("\n", lines));
                    assertTrue(row.contains(",bytes+content,ok,"), row);
                    String[] fields = row.split(",", -1);
                    // copied_pct, ring_pct, rendezvous_pct: RDMA rows only; v1 here, so no ring or rendezvous bytes
                    assertEquals(transport.startsWith("rdma") ? "0.0,0.0" : ",", fields[19] + ',' + fields[20], row);
                    String figure = mode.equals("latency") ? fields[7] : fields[11]; // p50_us, mb_per_s
                    assertTrue(Double.parseDouble(figure) > 0, row);
                }
            }
        }
        assertTrue(output.contains("ratios to nio"), output);

        DocumentBuilderFactory factory = DocumentBuilderFactory.newInstance();
        factory.setNamespaceAware(true);
        Document doc = factory.newDocumentBuilder().parse(svg.toFile());
        assertEquals("svg", doc.getDocumentElement().getLocalName());
        assertEquals(2 * 3, doc.getElementsByTagNameNS("http://www.w3.org/2000/svg", "polyline").getLength());
    }

    @Test
    void rdmaBufferSizeReachesTheChannelsOfBothEnds() {
        double standard = idleRegisteredKiB();
        double large = idleRegisteredKiB("--rdma-buffer-size", "64K");
        // each end holds 16 receive buffers: 64 KiB ones add 16 x 48 KiB = 768 KiB per end, so more than one and a
        // half ends' worth is both ends (836 -> 3332 KiB on the emulated provider)
        assertTrue(large - standard > 1.5 * 768,
                "idle KiB per connection: " + standard + " with 16 KiB receive buffers, " + large + " with 64 KiB");
    }

    /** The idle registered KiB per connection (both ends) the tool prints for a 64 KiB stream, checked byte by byte. */
    private static double idleRegisteredKiB(String... extra) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        List<String> args = new ArrayList<>(List.of("--transports", "rdma", "--provider", "emulated", "--mode", "bw",
                "-s", "64K", "-n", "20", "-w", "0", "--verify", "--timeout", "10"));
        args.addAll(List.of(extra));
        int status = PerfTool.run(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(out, true, StandardCharsets.UTF_8), args.toArray(new String[0]));
        String output = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, output);
        Matcher m = Pattern.compile("(?m)^rdma \\(emulated\\) +bandwidth 64 KiB +([0-9.]+) +[0-9.]+$").matcher(output);
        assertTrue(m.find(), output);
        return Double.parseDouble(m.group(1));
    }

    @Test
    void badCommandLineExitsWithUsage() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status = PerfTool.run(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), "--size", "65M");
        assertEquals(2, status);
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("usage:"));
    }

    @Test
    void sizes() {
        assertArrayEquals(new int[] {8, 64, 4096, 1 << 20}, PerfOptions.sizes("64,8,4K,1MiB,64"));
        assertEquals(18, PerfOptions.sizes("8-1M").length);
        assertArrayEquals(new int[] {1000, 1024}, PerfOptions.sizes("1000B,1KB"));
    }

    @Test
    void readerFindsMessagesInAnyPiecesAndCatchesCorruption() {
        int size = 20;
        ByteBuf stream = Unpooled.buffer();
        for (long seq = 0; seq < 3; seq++) {
            stream.writeLongLE(seq);
            for (int j = 8; j < size; j++) {
                stream.writeByte(MessageReader.patternByte(j));
            }
        }
        MessageReader reader = new MessageReader();
        reader.reset(size, true);
        int messages = 0;
        while (stream.isReadable()) {
            ByteBuf piece = stream.readSlice(Math.min(7, stream.readableBytes())); // pieces across message bounds
            while (piece.isReadable()) {
                messages += reader.read(piece) ? 1 : 0;
            }
        }
        assertEquals(3, messages);
        assertEquals(60, reader.bytes());
        assertEquals(0, reader.errors());

        stream.setByte(size + 12, stream.getByte(size + 12) + 1); // message 1, pattern byte
        stream.setByte(2 * size, 7); // message 2, sequence number
        stream.readerIndex(0);
        reader.reset(size, true);
        while (stream.isReadable()) {
            reader.read(stream);
        }
        assertEquals(2, reader.errors());
        assertFalse(reader.firstError().isEmpty());
        stream.release();
    }
}
