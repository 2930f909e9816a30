package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.concurrent.FastThreadLocalThread;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.ResourceLock;
import org.nettyrdma.testing.LeakRecorder;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.emulated.EmulatedFabric;

import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

class RdmaByteBufAllocatorTest {
    private static final int MIB = 1 << 20;

    @Test
    void sizeClassesArePowersOfTwoFrom64BytesTo1MiB() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        int[][] cases = {
            {1, 64}, {63, 64}, {64, 64}, {65, 128}, {1000, 1024}, {1024, 1024}, {1025, 2048}, {65536, 65536},
            {MIB - 1, MIB}, {MIB, MIB}, {MIB + 1, MIB + 1}, {3 * MIB + 5, 3 * MIB + 5},
        };
        for (int[] c : cases) {
            assertEquals(c[1], alloc.slotSize(c[0]), "slot of " + c[0]);
            ByteBuf buf = alloc.directBuffer(c[0]);
            try {
                assertEquals(c[0], buf.capacity());
                assertEquals(c[1], alloc.bytesInUse(), "memory held for " + c[0] + " bytes");
                assertEquals(1, alloc.buffersInUse());
                RdmaByteBuf rdma = RdmaByteBuf.unwrap(buf);
                if (c[0] > MIB) {
                    assertEquals(c[0], rdma.region().capacity(), "a region of its own");
                    assertEquals(0, rdma.regionOffset());
                    assertTrue(rdma.isAloneInRegion(), "a window over its region exposes it alone");
                } else {
                    assertFalse(rdma.isAloneInRegion(), "a slot shares its region");
                    assertEquals(0, rdma.regionOffset() % c[1], "slots are aligned to their size");
                    assertTrue(rdma.region().capacity() >= c[1]);
                }
            } finally {
                buf.release();
            }
            assertEquals(0, alloc.bytesInUse());
            assertEquals(0, alloc.buffersInUse());
        }
    }

    @Test
    void emptyBufferIsTheSharedEmptyOne() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        ByteBuf empty = alloc.directBuffer(0, 0);
        assertEquals(0, empty.capacity());
        assertEquals(0, alloc.buffersInUse());
        ByteBuf growable = alloc.directBuffer(0);
        assertEquals(1, alloc.buffersInUse());
        growable.writeLong(1);
        growable.release();
    }

    @Test
    void regionsAreSharedByASizeClassAndKeptWhileInUse() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        List<ByteBuf> bufs = new ArrayList<>();
        for (int i = 0; i < 9; i++) {
            bufs.add(alloc.directBuffer(MIB));
        }
        // 1 MiB slots come four to a 4 MiB region
        assertEquals(3, alloc.regionCount());
        assertEquals(12L * MIB, alloc.regionBytes());
        assertEquals(alloc.regionBytes(), alloc.metric().usedDirectMemory());
        assertEquals(9, alloc.buffersInUse());
        assertEquals(9L * MIB, alloc.bytesInUse());

        Map<RegisteredRegion, Integer> perRegion = new IdentityHashMap<>();
        for (ByteBuf buf : bufs) {
            perRegion.merge(RdmaByteBuf.unwrap(buf).region(), 1, Integer::sum);
        }
        assertEquals(3, perRegion.size());

        // release in an order that empties regions one by one, checking that no live buffer's region is closed
        bufs.sort(Comparator.comparingInt(b -> System.identityHashCode(RdmaByteBuf.unwrap(b).region())));
        while (!bufs.isEmpty()) {
            bufs.remove(0).release();
            for (ByteBuf live : bufs) {
                assertFalse(RdmaByteBuf.unwrap(live).region().isClosed(), "region of a buffer in use");
                live.setLong(MIB - 8, 1); // still usable
            }
        }
        assertEquals(0, alloc.buffersInUse());
        assertEquals(3, alloc.regionCount(), "one empty region per size class, and spares up to 16 MiB, are kept");
        assertEquals(12L * MIB, alloc.regionBytes());
    }

    /**
     * A burst's regions go back beyond one per size class and 16 MiB of spares; the spares serve the next burst with
     * no new region (no registration per message for a pipeline that holds 16 MiB of 1 MiB buffers at a time).
     */
    @Test
    void aBurstKeepsOneRegionAndTheSparesAndTheNextBurstRegistersNothing() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        List<ByteBuf> bufs = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            bufs.add(alloc.directBuffer(MIB));
        }
        assertEquals(10, alloc.regionCount());
        bufs.forEach(ByteBuf::release);
        bufs.clear();
        assertEquals(1 + RdmaByteBufAllocator.SPARE_BYTES / (4 * MIB), alloc.regionCount(),
                "one region, and 16 MiB of spares");
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 16; i++) {
                bufs.add(alloc.directBuffer(MIB));
            }
            assertEquals(5, alloc.regionCount(), "round " + round + ": the spares, no region more");
            bufs.forEach(ByteBuf::release);
            bufs.clear();
            assertEquals(5, alloc.regionCount(), "round " + round + ": none closed");
        }
        ByteBuf small = alloc.directBuffer(64 << 10);
        assertEquals(6, alloc.regionCount(), "another size class has its own first region");
        small.release();
        assertEquals(6, alloc.regionCount(), "and keeps it");
    }

    @Test
    void distinctBuffersDoNotOverlap() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        Random random = new Random(4);
        List<ByteBuf> bufs = new ArrayList<>();
        try {
            for (int i = 0; i < 5000; i++) {
                bufs.add(alloc.directBuffer(1 + random.nextInt(i % 10 == 0 ? 70000 : 300)));
            }
            Map<RegisteredRegion, List<int[]>> ranges = new IdentityHashMap<>();
            for (ByteBuf buf : bufs) {
                RdmaByteBuf rdma = RdmaByteBuf.unwrap(buf);
                ranges.computeIfAbsent(rdma.region(), r -> new ArrayList<>())
                        .add(new int[] {rdma.regionOffset(), rdma.regionOffset() + alloc.slotSize(buf.capacity())});
            }
            for (List<int[]> list : ranges.values()) {
                list.sort(Comparator.comparingInt(r -> r[0]));
                for (int i = 1; i < list.size(); i++) {
                    assertTrue(list.get(i - 1)[1] <= list.get(i)[0], "slots overlap");
                }
            }
            // bulk accesses only: paranoid leak detection records a stack trace for every access
            for (int i = 0; i < bufs.size(); i++) {
                ByteBuf buf = bufs.get(i);
                byte[] fill = new byte[buf.capacity()];
                Arrays.fill(fill, (byte) i);
                buf.writeBytes(fill);
            }
            for (int i = 0; i < bufs.size(); i++) {
                ByteBuf buf = bufs.get(i);
                byte[] expected = new byte[buf.capacity()];
                Arrays.fill(expected, (byte) i);
                byte[] actual = new byte[buf.capacity()];
                buf.readBytes(actual);
                assertTrue(Arrays.equals(expected, actual), "buffer " + i + " was overwritten");
            }
        } finally {
            for (ByteBuf buf : bufs) {
                buf.release();
            }
        }
        assertEquals(0, alloc.buffersInUse());
    }

    @Test
    void regionsAreRegisteredOncePerProtectionDomainAndCanBeDeregistered() throws VerbsException {
        EmulatedFabric fabric = new EmulatedFabric();
        Device device = fabric.addDevice("emu0", EmulatedFabric.defaultAttributes(DeviceAttributes.Transport.ROCE),
                InetAddress.getLoopbackAddress());
        ProtectionDomain pd1 = device.allocPd();
        ProtectionDomain pd2 = device.allocPd();
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        ByteBuf a = alloc.directBuffer(100);
        ByteBuf b = alloc.directBuffer(100);
        ByteBuf large = alloc.directBuffer(2 * MIB);
        try {
            assertEquals(0, alloc.registeredBytes(), "nothing is registered until the transport asks");
            RdmaByteBuf ra = RdmaByteBuf.unwrap(a);
            RdmaByteBuf rb = RdmaByteBuf.unwrap(b);
            assertSame(ra.region(), rb.region());
            long slab = ra.region().capacity();

            MemoryRegion mr = ra.region().memoryRegion(pd1);
            assertSame(mr, rb.region().memoryRegion(pd1));
            assertEquals(slab, alloc.registeredBytes());
            // buffer index 8 is what SGE address mr.address() + regionOffset() + 8 names: byte regionOffset() + 8 of
            // the registered memory
            a.setInt(8, 0x5eed);
            assertEquals(0x5eed, mr.buffer().getInt(ra.regionOffset() + 8));

            ra.region().memoryRegion(pd2);
            RdmaByteBuf.unwrap(large).region().memoryRegion(pd1);
            assertEquals(2 * slab + 2 * MIB, alloc.registeredBytes());

            large.release();
            assertEquals(2 * slab, alloc.registeredBytes(), "a large buffer's region is deregistered on release");
            alloc.deregister(pd1);
            assertEquals(slab, alloc.registeredBytes());
            pd1.close(); // no memory region keeps it busy any more
            alloc.deregister(pd2);
            assertEquals(0, alloc.registeredBytes());
            pd2.close();
        } finally {
            a.release();
            b.release();
            if (large.refCnt() > 0) {
                large.release();
            }
        }
    }

    @Test
    @ResourceLock(LeakRecorder.LEVEL_LOCK) // not while steadyStateAllocateAndReleaseAllocatesNothing disables tracking
    void leakIsDetected() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        // the leak is reported here, to this test, and doesn't fail the class (LeakCheckExtension)
        List<LeakRecorder.Leak> leaks = LeakRecorder.expectLeaks(() -> leakSomething(alloc));
        assertEquals(1, leaks.size(), leaks::toString);
        assertEquals("ByteBuf", leaks.get(0).resourceType());
        assertTrue(leaks.get(0).records().contains("leakSomething"), leaks.get(0)::toString);
        // the allocator itself can't know: the buffer was never released
        assertEquals(1, alloc.buffersInUse());
    }

    private static void leakSomething(RdmaByteBufAllocator alloc) {
        alloc.directBuffer(100).writeInt(1); // never released: its tracker is garbage collected unclosed
    }

    @Test
    @Timeout(30)
    @ResourceLock(LeakRecorder.LEVEL_LOCK) // it disables leak detection for a while
    void steadyStateAllocateAndReleaseAllocatesNothing() throws Exception {
        java.lang.management.ThreadMXBean bean = ManagementFactory.getThreadMXBean();
        Assumptions.assumeTrue(bean instanceof com.sun.management.ThreadMXBean,
                "com.sun.management.ThreadMXBean is not available on this JVM");
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) bean;
        Assumptions.assumeTrue(threads.isThreadAllocatedMemorySupported(),
                "the JVM can't measure per-thread allocation");
        if (!threads.isThreadAllocatedMemoryEnabled()) {
            threads.setThreadAllocatedMemoryEnabled(true);
        }
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        int[] returned = new int[1];
        RdmaByteBuf.LendHook lender = new RdmaByteBuf.LendHook() {
            @Override
            public boolean reclaim(RdmaByteBuf buf) {
                return false; // back to the pool: the allocator's path is what is measured
            }

            @Override
            public void returned(int bytes) {
                returned[0]++;
            }
        };
        int iterations = 200_000;
        long[] allocated = new long[1];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        ResourceLeakDetector.Level level = ResourceLeakDetector.getLevel();
        // leak tracking allocates a tracker per sampled buffer by design; what is measured is the allocator itself
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.DISABLED);
        try {
            // buffer objects are recycled on Netty's threads (FastThreadLocalThread), as for Netty's pooled allocator
            Thread thread = new FastThreadLocalThread(() -> {
                try {
                    cycle(alloc, lender, 20_000); // warm up: recycler, slabs, JIT
                    long before = threads.getCurrentThreadAllocatedBytes();
                    cycle(alloc, lender, iterations);
                    allocated[0] = threads.getCurrentThreadAllocatedBytes() - before;
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            thread.start();
            thread.join();
        } finally {
            ResourceLeakDetector.setLevel(level);
        }
        if (failure.get() != null) {
            fail(failure.get());
        }
        assertEquals(20_000 + iterations, returned[0]);
        assertEquals(0, alloc.buffersInUse());
        // five buffer operations per iteration; anything per operation would be at least 16 bytes each
        assertTrue(allocated[0] < iterations / 10, allocated[0] + " bytes allocated in " + iterations
                + " iterations");
    }

    private static void cycle(RdmaByteBufAllocator alloc, RdmaByteBuf.LendHook lender, int iterations) {
        for (int i = 0; i < iterations; i++) {
            ByteBuf small = alloc.directBuffer(100);
            small.writeLong(i).writeZero(20); // grows within its 128-byte slot
            ByteBuf medium = alloc.ioBuffer(3000);
            medium.writeBytes(small, 0, 8);
            ByteBuf grown = alloc.directBuffer(64);
            grown.writeZero(200); // moves to a 256-byte slot
            if (medium.getLong(0) != i || grown.capacity() < 200) {
                throw new AssertionError("bad contents");
            }
            grown.release();
            medium.release();
            small.release();
            RdmaByteBuf received = alloc.untrackedBuffer(16384, 16384); // a receive buffer, lent and released
            received.lend(lender, 16384, 0, 8).setLong(0, i);
            received.release();
        }
    }

    @Test
    @Timeout(30)
    void concurrentAllocateGrowAndReleaseKeepContents() throws Exception {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator();
        byte[] pattern = new byte[3 * MIB];
        new Random(5).nextBytes(pattern);
        int threads = 8;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
        ConcurrentLinkedQueue<ByteBuf> handOff = new ConcurrentLinkedQueue<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong operations = new AtomicLong();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            long seed = t;
            Runnable work = () -> {
                try {
                    start.await();
                    stress(alloc, pattern, new Random(seed), deadline, handOff, operations);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            };
            // half on Netty threads (recycled buffer objects), half on plain threads
            workers.add((t & 1) == 0 ? new FastThreadLocalThread(work) : new Thread(work));
        }
        workers.forEach(Thread::start);
        start.countDown();
        for (Thread w : workers) {
            w.join();
        }
        ByteBuf left;
        while ((left = handOff.poll()) != null) {
            check(left, pattern);
            left.release();
        }
        if (failure.get() != null) {
            fail(failure.get());
        }
        assertTrue(operations.get() > 1000, operations.get() + " operations");
        assertEquals(0, alloc.buffersInUse());
        assertEquals(0, alloc.bytesInUse());
        assertTrue(alloc.regionBytes() <= 15L * 4 * MIB + RdmaByteBufAllocator.SPARE_BYTES,
                "at most one empty region per size class and the spares: " + alloc.regionBytes());
    }

    private static void stress(RdmaByteBufAllocator alloc, byte[] pattern, Random random, long deadline,
                               ConcurrentLinkedQueue<ByteBuf> handOff, AtomicLong operations) {
        ArrayDeque<ByteBuf> mine = new ArrayDeque<>();
        while (System.nanoTime() - deadline < 0) {
            int kind = random.nextInt(100);
            int size = kind < 70 ? 8 + random.nextInt(4096)
                    : kind < 97 ? 4097 + random.nextInt(256 * 1024) : MIB + random.nextInt(MIB);
            ByteBuf buf = alloc.directBuffer(random.nextInt(3) == 0 ? size / 2 : size);
            int start = random.nextInt(pattern.length - size);
            // the pattern offset goes first, so that whoever releases it can check it
            buf.writeInt(start);
            buf.writeBytes(pattern, start, size - 4); // grows a buffer that was allocated at half the size
            mine.add(buf);
            if (random.nextInt(4) == 0) {
                ByteBuf from = mine.poll();
                handOff.add(from);
            }
            while (mine.size() > 16) {
                ByteBuf old = mine.poll();
                check(old, pattern);
                old.release();
            }
            ByteBuf theirs = handOff.poll();
            if (theirs != null) {
                check(theirs, pattern);
                theirs.release();
            }
            operations.incrementAndGet();
        }
        for (ByteBuf buf : mine) {
            check(buf, pattern);
            buf.release();
        }
    }

    private static void check(ByteBuf buf, byte[] pattern) {
        int start = buf.getInt(0);
        byte[] actual = new byte[buf.writerIndex() - 4];
        buf.getBytes(4, actual);
        if (!Arrays.equals(actual, 0, actual.length, pattern, start, start + actual.length)) {
            throw new AssertionError("contents changed under " + buf);
        }
    }

    @Test
    void heapBuffersWhenNotPreferringDirect() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(false);
        ByteBuf heap = alloc.buffer(10);
        ByteBuf io = alloc.ioBuffer(10);
        try {
            assertFalse(heap.isDirect());
            assertNull(RdmaByteBuf.unwrap(heap));
            assertNotNull(RdmaByteBuf.unwrap(io), "I/O buffers are registered whatever the preference");
        } finally {
            heap.release();
            io.release();
        }
        assertTrue(alloc.toString().startsWith("RdmaByteBufAllocator("), alloc.toString());
        assertTrue(RdmaByteBufAllocator.DEFAULT.isDirectBufferPooled());
        ByteBuf d = RdmaByteBufAllocator.DEFAULT.buffer();
        assertTrue(d.isDirect());
        d.release();
    }
}
