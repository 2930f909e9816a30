package org.nettyrdma.deploy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The servers' probe, rdma-listening.sh PORT, against what {@code rdma resource show cm_id} prints: LISTENING is the
 * line the VM's guest printed (iproute2 6.1, kernel 6.1) while echo.EchoServer listened on rxe0, port 7000; the
 * others are made in its format (a connection's id, an IPv6 listener at the end of a line).
 */
class ProbeScriptTest {
    private static final String LISTENING = "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 228 comm multiThreadIoEv "
            + "src-addr 10.77.0.1:7000 dst-addr 0.0.0.0:0 ";
    private static final String CONNECTED = "link rxe0/1 cm-idn 1 state CONNECT ps TCP pid 228 comm multiThreadIoEv "
            + "src-addr 10.77.0.1:7000 dst-addr 10.77.0.1:40312 ";
    private static final String IPV6_LISTENING = "link siw0/1 cm-idn 2 state LISTEN ps TCP pid 228 comm java "
            + "src-addr fd78::1:7000 dst-addr :::0";

    @TempDir
    Path bin;

    private int probe(String rdmaOutput, String port) throws IOException, InterruptedException {
        Path rdma = bin.resolve("rdma");
        Files.writeString(rdma, "#!/bin/sh\n[ \"$*\" = \"resource show cm_id\" ] || exit 9\ncat <<'OUT'\n" + rdmaOutput
                + "\nOUT\n");
        Files.setPosixFilePermissions(rdma, PosixFilePermissions.fromString("rwxr-xr-x"));
        ProcessBuilder pb = new ProcessBuilder("sh", Manifests.DOCKER.resolve("rdma-listening.sh").toString(), port)
                .redirectErrorStream(true);
        pb.environment().put("PATH", bin + ":" + System.getenv("PATH"));
        Process p = pb.start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals("", out, "the probe prints nothing");
        return p.exitValue();
    }

    @Test
    void listeningOnThePortIsReady() throws Exception {
        assertEquals(0, probe(LISTENING, "7000"));
        assertEquals(0, probe(CONNECTED + "\n" + LISTENING, "7000"));
        assertEquals(0, probe(IPV6_LISTENING, "7000"), "an address at the end of the line");
    }

    @Test
    void otherPortsOrStatesAreNot() throws Exception {
        assertEquals(1, probe(LISTENING, "700"));
        assertEquals(1, probe(LISTENING, "70000"));
        assertEquals(1, probe(CONNECTED, "7000"), "a connection is no listener");
        assertEquals(1, probe("", "7000"), "nothing listens");
    }
}
