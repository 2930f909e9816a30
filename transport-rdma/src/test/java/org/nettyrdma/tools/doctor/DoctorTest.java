package org.nettyrdma.tools.doctor;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The doctor on a made-up machine ({@link FakeHost}): everything in place, then one fault at a time; each fault must
 * turn into a problem of the right check, with a fix, and exit code 1. The memlock estimate is measured on the
 * emulated provider, as on a real machine.
 */
class DoctorTest {
    private static final long MIB = 1L << 20;

    @TempDir
    Path dir;

    /** One run: exit code, output, and the report as JSON when asked with --json. */
    private record Run(int exitCode, String out, String err) {
        JsonObject json() {
            return JsonParser.parseString(out).getAsJsonObject();
        }

        /** The checks of one name: status and message, "STATUS message | fix". */
        List<String> checks(String name) {
            List<String> result = new ArrayList<>();
            for (JsonElement e : json().getAsJsonArray("checks")) {
                JsonObject c = e.getAsJsonObject();
                if (c.get("check").getAsString().equals(name)) {
                    result.add(c.get("status").getAsString() + " " + c.get("message").getAsString() + " | "
                            + (c.get("fix").isJsonNull() ? "" : c.get("fix").getAsString()));
                }
            }
            return result;
        }

        String status(String name) {
            List<String> c = checks(name);
            assertFalse(c.isEmpty(), "no check " + name + " in " + out);
            return c.stream().anyMatch(s -> s.startsWith("PROBLEM")) ? "PROBLEM"
                    : c.stream().anyMatch(s -> s.startsWith("WARNING")) ? "WARNING" : "OK";
        }
    }

    private Run run(FakeHost host, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = Doctor.run(args, host.hostRoot(), host.lib(), host.netdevs(),
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Run(rc, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static void assertContains(String text, String... phrases) {
        for (String p : phrases) {
            assertTrue(text.contains(p), "'" + p + "' in:\n" + text);
        }
    }

    @Test
    void everythingInPlaceIsOkAndListsDevicesPortsAndGids() {
        FakeHost host = new FakeHost(dir);
        Run text = run(host, "--address", "10.77.0.1");
        assertEquals(0, text.exitCode(), text.out());
        assertContains(text.out(), "rxe0  RoCE", "/dev/infiniband/uverbs0", "port 1: ACTIVE (LinkUp), Ethernet, netdev "
                + "rxe-a", "gid 1  0000:0000:0000:0000:0000:ffff:0a4d:0001  RoCE v2  10.77.0.1",
                "siw0  iWARP, Software iWARP stack, /dev/infiniband/uverbs1",
                // siw names no netdev in gid_attrs: found by the MAC in its GID
                "netdev siw-a 10.78.0.1 fd78::1", "fd77::1", "OK: nothing to fix\n");
        Run json = run(host, "--json", "--address", "10.77.0.1");
        assertEquals(0, json.exitCode());
        JsonObject root = json.json();
        assertTrue(root.get("ok").getAsBoolean());
        JsonArray devices = root.getAsJsonArray("devices");
        assertEquals(2, devices.size());
        JsonObject rxe = devices.get(0).getAsJsonObject();
        assertEquals("rxe0", rxe.get("name").getAsString());
        JsonArray gids = rxe.getAsJsonArray("ports").get(0).getAsJsonObject().getAsJsonArray("gids");
        assertEquals(3, gids.size(), "the empty GID is left out: " + gids);
        JsonObject v4 = gids.get(1).getAsJsonObject();
        assertEquals("v2", v4.get("roceVersion").getAsString());
        assertEquals("rxe-a", v4.get("netdev").getAsString());
        assertEquals("10.77.0.1", v4.get("ip").getAsString());
        assertTrue(gids.get(0).getAsJsonObject().get("ip").isJsonNull(), "link-local GIDs are no address to bind");
        JsonObject siw = devices.get(1).getAsJsonObject().getAsJsonArray("ports").get(0).getAsJsonObject();
        assertEquals("siw-a", siw.get("netdev").getAsString());
        assertEquals("OK", json.status("address"));
        assertEquals("OK", json.status("provider"));
        assertTrue(root.getAsJsonObject("memlock").get("neededBytes").getAsLong() > 0);
    }

    @Test
    void memlockLimitBelowTheTransportsMinimumIsAProblemEvenForTheProvider() {
        FakeHost host = new FakeHost(dir).memlock(64 << 10).capabilities(FakeHost.NO_IPC_LOCK);
        Run r = run(host, "--json", "--quick");
        assertEquals(1, r.exitCode(), r.out());
        assertEquals("PROBLEM", r.status("memlock"));
        assertContains(r.checks("memlock").get(0), "64 KiB", "no CAP_IPC_LOCK", "ulimit -l unlimited");
        assertEquals("PROBLEM", r.status("provider"));
        assertContains(r.checks("provider").get(0), "MEMLOCK_TOO_LOW");
        assertEquals("WARNING", r.status("capability"));
    }

    @Test
    void softIwarpLoadedMakesTheTransportRefuseALowLimitEvenWithTheCapability() {
        // the address is rxe0's, but the transport's own check counts the siw driver (JniAvailability): both agree
        FakeHost host = new FakeHost(dir).memlock(64 << 10);
        Run r = run(host, "--json", "--quick", "--address", "10.77.0.1");
        assertEquals(1, r.exitCode(), r.out());
        assertContains(r.checks("memlock").get(0), "PROBLEM", "soft-iWARP driver is loaded");
        assertContains(r.checks("provider").get(0), "MEMLOCK_TOO_LOW");
    }

    @Test
    void capabilityLiftsALimitBelowTheEstimateExceptOnSoftIwarp() {
        // 128 MiB: above the transport's minimum (64 MiB), below what 200 connections register
        FakeHost host = new FakeHost(dir).memlock(128 * MIB);
        Run withCap = run(host, "--json", "--connections", "200", "--address", "10.77.0.1");
        assertEquals(0, withCap.exitCode(), withCap.out());
        assertContains(withCap.checks("memlock").get(0), "OK", "CAP_IPC_LOCK lifts it");

        Run siw = run(host, "--json", "--connections", "200", "--address", "10.78.0.1");
        assertEquals(1, siw.exitCode(), siw.out());
        assertContains(siw.checks("memlock").get(0), "PROBLEM", "soft-iWARP");

        host.capabilities(FakeHost.NO_IPC_LOCK);
        Run dropped = run(host, "--json", "--connections", "200", "--address", "10.77.0.1");
        assertEquals(1, dropped.exitCode(), dropped.out());
        assertContains(dropped.checks("memlock").get(0), "PROBLEM", "128 MiB", "200 connections", "no CAP_IPC_LOCK");
        assertEquals("WARNING", dropped.status("capability"));

        Run few = run(host, "--json", "--connections", "4", "--event-loops", "1", "--address", "10.77.0.1");
        assertEquals(0, few.exitCode(), "4 connections on one loop fit in 128 MiB: " + few.out());
    }

    @Test
    void estimateFollowsTheMeasuredConnectionAndTheLendingBounds() {
        Run r = run(new FakeHost(dir), "--json", "--connections", "10", "--event-loops", "2");
        JsonObject m = r.json().getAsJsonObject("memlock");
        long perConnection = m.get("perConnectionBytes").getAsLong();
        assertEquals(ConnectionMemoryTest.defaultConnectionBytes(), perConnection);
        // 10 connections' SENDs in flight hold 320 KiB of send staging each at most, under the loops' caps (2 x 64 MiB)
        long staging = 10 * ConnectionMemoryTest.defaultStagingBytes();
        assertEquals(staging, m.get("stagingBytes").getAsLong());
        // 10 channels may lend 4 MiB each (MAX_LENT_RECEIVE_BYTES), under the loops' 2 x 64 MiB
        assertEquals(40 * MIB, m.get("lentBytes").getAsLong());
        assertEquals(2 * 4 * MIB, m.get("poolRegionBytes").getAsLong());
        assertEquals(10 * perConnection + staging + 40 * MIB + 8 * MIB, m.get("neededBytes").getAsLong());
    }

    @Test
    void sendStagingIsBoundByTheLoopsCaps() {
        Run r = run(new FakeHost(dir), "--json", "--connections", "1000", "--event-loops", "2");
        JsonObject m = r.json().getAsJsonObject("memlock");
        // 1000 x 320 KiB in flight at most, but each loop registers 64 MiB of staging at most
        assertEquals(2 * 64 * MIB, m.get("stagingBytes").getAsLong());
    }

    @Test
    void removedDevicesAreAProblem() {
        Run r = run(new FakeHost(dir).removeDevices(), "--json", "--quick");
        assertEquals(1, r.exitCode(), r.out());
        assertEquals("PROBLEM", r.status("devices"));
        assertContains(r.checks("devices").get(0), "no RDMA device", "rdma_shared_device_a");
        assertContains(r.checks("provider").get(0), "NO_DEVICE");
    }

    @Test
    void hiddenDevInfinibandIsAProblem() {
        Run r = run(new FakeHost(dir).hideDevInfiniband(), "--json", "--quick");
        assertEquals(1, r.exitCode(), r.out());
        assertContains(r.checks("device nodes").get(0), "PROBLEM", "/dev/infiniband is missing", "device plugin");
        assertContains(r.checks("provider").get(0), "DEV_INFINIBAND_MISSING");
        assertFalse(r.json().getAsJsonObject("devInfiniband").get("present").getAsBoolean());
    }

    @Test
    void missingUverbsNodeOfTheAddressDeviceIsAProblem() {
        // the device plugin mounted siw0's node only
        Run r = run(new FakeHost(dir).removeNode("uverbs0"), "--json", "--quick", "--address", "10.77.0.1");
        assertEquals(1, r.exitCode(), r.out());
        assertContains(r.checks("device nodes").get(0), "PROBLEM", "uverbs0 (rxe0)");
        assertEquals(0, run(new FakeHost(dir).removeNode("uverbs0"), "--quick", "--address", "10.78.0.1")
                .exitCode(), "siw0's node is there");
    }

    @Test
    void linkDownOfTheAddressDeviceIsAProblemOfAnotherAWarning() {
        FakeHost host = new FakeHost(dir).linkDown("rxe0", "rxe-a");
        Run r = run(host, "--json", "--quick", "--address", "10.77.0.1");
        assertEquals(1, r.exitCode(), r.out());
        assertContains(r.checks("ports").get(0), "PROBLEM", "rxe0 port 1 is DOWN (Disabled, netdev rxe-a)",
                "ip link set rxe-a up");
        Run other = run(host, "--json", "--quick", "--address", "10.78.0.1");
        assertEquals(0, other.exitCode(), other.out());
        assertEquals("WARNING", other.status("ports"));
        host.linkDown("siw0", "siw-a");
        assertEquals(1, run(host, "--quick").exitCode(), "no active port anywhere");
    }

    @Test
    void addressWithoutAnRdmaDeviceIsAProblemThatNamesTheUsableOnes() {
        FakeHost host = new FakeHost(dir);
        Run r = run(host, "--json", "--quick", "--address", "192.0.2.10");
        assertEquals(1, r.exitCode(), r.out());
        assertContains(r.checks("address").get(0), "PROBLEM", "192.0.2.10 is on eth0, which no RDMA device uses",
                "rxe0: 10.77.0.1", "siw0: 10.78.0.1");
        Run nowhere = run(host, "--json", "--quick", "--address", "198.51.100.1");
        assertContains(nowhere.checks("address").get(0), "no interface of this host has 198.51.100.1");
        Run v6 = run(host, "--json", "--quick", "--address", "fd77::1");
        assertEquals("OK", v6.status("address"), v6.out());
    }

    @Test
    void emulatedProviderIsAWarning() {
        String old = System.getProperty("org.nettyrdma.provider");
        System.setProperty("org.nettyrdma.provider", "emulated");
        try {
            Run r = run(new FakeHost(dir), "--json", "--quick");
            assertEquals(0, r.exitCode(), r.out());
            assertContains(r.checks("provider").get(0), "WARNING", "in-process only");
        } finally {
            if (old == null) {
                System.clearProperty("org.nettyrdma.provider");
            } else {
                System.setProperty("org.nettyrdma.provider", old);
            }
        }
    }

    @Test
    void badArgumentsExitWithTwoAndTheUsage() {
        Run r = run(new FakeHost(dir), "--connections", "zero");
        assertEquals(2, r.exitCode());
        assertContains(r.err(), "--connections: zero", "usage: doctor");
        assertEquals(2, run(new FakeHost(dir), "--receive-buffer-size", "10").exitCode(), "the channel's own range");
        assertEquals(2, run(new FakeHost(dir), "--frobnicate").exitCode());
        Run help = run(new FakeHost(dir), "--help");
        assertEquals(0, help.exitCode());
        assertContains(help.out(), "--address IP");
    }
}
