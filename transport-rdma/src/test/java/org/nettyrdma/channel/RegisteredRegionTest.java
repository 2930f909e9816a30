package org.nettyrdma.channel;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.emulated.EmulatedFabric;

import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RegisteredRegionTest {
    private Device device;
    private ProtectionDomain pd1;
    private ProtectionDomain pd2;
    private final AtomicLong registered = new AtomicLong();

    @BeforeEach
    void setUp() throws VerbsException {
        EmulatedFabric fabric = new EmulatedFabric();
        device = fabric.addDevice("emu0", EmulatedFabric.defaultAttributes(DeviceAttributes.Transport.ROCE),
                InetAddress.getLoopbackAddress());
        pd1 = device.allocPd();
        pd2 = device.allocPd();
    }

    @AfterEach
    void tearDown() throws VerbsException {
        pd1.close();
        pd2.close();
    }

    @Test
    void registersLazilyOncePerProtectionDomain() throws VerbsException {
        RegisteredRegion region = new RegisteredRegion(64 * 1024, registered);
        try {
            assertEquals(0, region.registrations(), "nothing registered before it is asked for");
            assertEquals(0, registered.get());

            MemoryRegion mr1 = region.memoryRegion(pd1);
            assertSame(mr1, region.memoryRegion(pd1), "registered once per protection domain");
            assertSame(pd1, mr1.pd());
            assertEquals(64 * 1024, mr1.length());
            assertEquals(RegisteredRegion.ACCESS, mr1.access());
            assertEquals(Access.LOCAL_WRITE, mr1.access(), "local access only: protocol v1 exposes no memory to peers");
            assertEquals(0, mr1.rkey(), "no remote key: a peer can neither read nor write this memory");
            assertEquals(1, region.registrations());
            assertEquals(64 * 1024, registered.get());

            MemoryRegion mr2 = region.memoryRegion(pd2);
            assertNotSame(mr1, mr2, "two protection domains, two memory regions");
            assertSame(pd2, mr2.pd());
            assertNotEquals(mr1.lkey(), mr2.lkey());
            assertSame(mr2, region.memoryRegion(pd2));
            assertSame(mr1, region.memoryRegion(pd1));
            assertEquals(2, region.registrations());
            assertEquals(2 * 64 * 1024, registered.get());
        } finally {
            region.close();
        }
        assertEquals(0, registered.get());
    }

    @Test
    void memoryIsTheRegisteredMemoryAndBigEndian() throws VerbsException {
        RegisteredRegion region = new RegisteredRegion(8192);
        try {
            ByteBuffer memory = region.memory();
            assertTrue(memory.isDirect());
            assertEquals(8192, region.capacity());
            assertEquals(8192, memory.capacity());
            assertEquals(0, memory.position());
            assertEquals(8192, memory.limit());
            assertEquals(ByteOrder.BIG_ENDIAN, memory.order());
            for (int i = 0; i < 8192; i += 512) {
                assertEquals(0, memory.getLong(i), "new memory is zeroed");
            }
            memory.putInt(1000, 0xcafebabe);
            // the region's byte i is what SGE address mr.address() + i names: the MR's view shows the same bytes
            MemoryRegion mr = region.memoryRegion(pd1);
            assertEquals(0xcafebabe, mr.buffer().getInt(1000));
            mr.buffer().put(4000, (byte) 42);
            assertEquals(42, memory.get(4000));
        } finally {
            region.close();
        }
    }

    @Test
    void closeDeregistersEverythingAndIsIdempotent() throws VerbsException {
        RegisteredRegion region = new RegisteredRegion(4096, registered);
        region.memoryRegion(pd1);
        region.memoryRegion(pd2);
        VerbsException busy = assertThrows(VerbsException.class, pd1::close, "a registered region keeps its PD busy");
        assertEquals(Errno.EBUSY, busy.errno());

        region.close();
        assertTrue(region.isClosed());
        assertEquals(0, region.registrations());
        assertEquals(0, registered.get());
        region.close();
        pd1.close(); // no longer busy
        assertThrows(IllegalStateException.class, () -> region.memoryRegion(pd2));
    }

    @Test
    void deregisterOneProtectionDomain() throws VerbsException {
        RegisteredRegion region = new RegisteredRegion(4096, registered);
        try {
            MemoryRegion first = region.memoryRegion(pd1);
            MemoryRegion other = region.memoryRegion(pd2);
            assertTrue(region.deregister(pd1));
            assertFalse(region.deregister(pd1));
            assertEquals(1, region.registrations());
            assertEquals(4096, registered.get());
            assertSame(other, region.memoryRegion(pd2));
            MemoryRegion again = region.memoryRegion(pd1);
            assertNotSame(first, again, "registered again after deregistration");
            assertEquals(2, region.registrations());
        } finally {
            region.close();
        }
    }

    @Test
    void failedRegistrationIsNotRemembered() throws VerbsException {
        EmulatedFabric fabric = new EmulatedFabric();
        DeviceAttributes d = EmulatedFabric.defaultAttributes(DeviceAttributes.Transport.ROCE);
        Device small = fabric.addDevice("small0", new DeviceAttributes(d.transport(), d.maxQp(), d.maxQpWr(),
                d.maxSge(), d.maxInlineData(), d.maxCqe(), 1, d.maxMrSize(), d.maxQpRdAtom()),
                InetAddress.getLoopbackAddress());
        ProtectionDomain pd = small.allocPd();
        RegisteredRegion taken = new RegisteredRegion(4096, registered);
        RegisteredRegion region = new RegisteredRegion(4096, registered);
        try {
            taken.memoryRegion(pd); // the device's only MR
            VerbsException e = assertThrows(VerbsException.class, () -> region.memoryRegion(pd));
            assertEquals("ibv_reg_mr", e.verb());
            assertEquals(0, region.registrations());
            assertEquals(4096, registered.get());
            taken.close();
            MemoryRegion mr = region.memoryRegion(pd); // tried again, and now it fits
            assertSame(mr, region.memoryRegion(pd));
        } finally {
            taken.close();
            region.close();
            pd.close();
        }
    }

    @Test
    @Timeout(10)
    void concurrentFirstUseRegistersOnce() throws Exception {
        RegisteredRegion region = new RegisteredRegion(4096, registered);
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            CountDownLatch start = new CountDownLatch(1);
            List<Future<MemoryRegion>> results = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                ProtectionDomain pd = (i & 1) == 0 ? pd1 : pd2;
                results.add(pool.submit(() -> {
                    start.await();
                    return region.memoryRegion(pd);
                }));
            }
            start.countDown();
            for (int i = 0; i < results.size(); i++) {
                assertSame(region.memoryRegion((i & 1) == 0 ? pd1 : pd2), results.get(i).get());
            }
            assertEquals(2, region.registrations());
            assertEquals(2 * 4096, registered.get());
        } finally {
            pool.shutdown();
            assertTrue(pool.awaitTermination(5, TimeUnit.SECONDS));
            region.close();
        }
    }

    /**
     * A bindable region (a buffer's own region, which the READ rendezvous may expose through a window) is registered with
     * MW_BIND where the device has memory windows, and with local access only where it has none (soft-iWARP); neither
     * gives it an rkey. Every other region has local access only.
     */
    @Test
    void bindableRegionsGetMwBindWhereTheDeviceHasWindows() throws VerbsException {
        Device iwarp = new EmulatedFabric().addDevice("emu1",
                EmulatedFabric.defaultAttributes(DeviceAttributes.Transport.IWARP), InetAddress.getLoopbackAddress());
        ProtectionDomain noWindows = iwarp.allocPd();
        assertTrue(device.attributes().supportsMemoryWindows());
        assertFalse(iwarp.attributes().supportsMemoryWindows());
        RegisteredRegion bindable = new RegisteredRegion(4096, registered, true);
        RegisteredRegion plain = new RegisteredRegion(4096, registered);
        try {
            assertTrue(bindable.isBindable());
            assertFalse(plain.isBindable());
            MemoryRegion mr = bindable.memoryRegion(pd1);
            assertEquals(Access.LOCAL_WRITE | Access.MW_BIND, mr.access());
            assertEquals(0, mr.rkey(), "MW_BIND grants no remote access");
            assertEquals(Access.LOCAL_WRITE, bindable.memoryRegion(noWindows).access());
            assertEquals(Access.LOCAL_WRITE, plain.memoryRegion(pd1).access());
        } finally {
            bindable.close();
            plain.close();
            noWindows.close();
        }
        assertEquals(0, registered.get());
    }

    @Test
    void wrapsMemoryItDoesNotOwn() throws VerbsException {
        assertThrows(IllegalArgumentException.class, () -> new RegisteredRegion(ByteBuffer.allocate(64), null));
        ByteBuffer external = ByteBuffer.allocateDirect(4096);
        external.position(100).limit(200);
        RegisteredRegion region = new RegisteredRegion(external, registered);
        assertEquals(4096, region.capacity());
        assertEquals(0, region.memory().position());
        assertEquals(4096, region.memory().limit());
        assertEquals(4096, region.memoryRegion(pd1).length());
        region.memory().put(7, (byte) 9);
        region.close();
        assertEquals(9, external.get(7), "memory the region doesn't own stays usable after close");
        assertEquals(0, registered.get());
    }
}
