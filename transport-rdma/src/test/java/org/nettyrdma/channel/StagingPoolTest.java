package org.nettyrdma.channel;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.emulated.EmulatedFabric;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The loop's send staging: regions grown on demand, the free stack, the cap and its waiters, and closing. */
class StagingPoolTest {
    private static final int SLOT = 16384;
    /** 1 MiB regions of 16 KiB slots. */
    private static final int PER_REGION = StagingPool.MAX_REGION_BYTES / SLOT;
    private static final long REGION = (long) PER_REGION * SLOT;

    /** Each test's own fabric: what a test leaves registered goes with it. */
    private EmulatedFabric fabric;
    private ProtectionDomain pd;
    private final RdmaCounters loop = new RdmaCounters();

    @BeforeEach
    void setUp() throws VerbsException {
        fabric = new EmulatedFabric();
        pd = fabric.addDevice("emu0", EmulatedFabric.defaultAttributes(DeviceAttributes.Transport.ROCE),
                InetAddress.getLoopbackAddress()).allocPd();
    }

    private StagingPool pool(long cap) {
        return new StagingPool(pd, SLOT, new StagingPool.Budget(cap), loop);
    }

    /** The live memory region that holds [address, address + length), if any. */
    private MemoryRegion regionOf(long address, int length) {
        for (MemoryRegion mr : fabric.liveMemoryRegions()) {
            if (address >= mr.address() && address + length <= mr.address() + mr.length()) {
                return mr;
            }
        }
        return null;
    }

    @Test
    void growsARegionAtATimeOnlyWhenNoSlotIsFree() throws VerbsException {
        StagingPool p = pool(64L << 20);
        assertEquals(0, p.registeredBytes(), "nothing registered before the first SEND");
        assertEquals(0, fabric.liveMemoryRegions().size());
        Set<Long> addresses = new HashSet<>();
        List<Integer> slots = new ArrayList<>();
        for (int i = 0; i < PER_REGION + 1; i++) {
            int s = p.acquire();
            slots.add(s);
            assertTrue(addresses.add(p.address(s)), "slot " + s + " handed out twice");
            MemoryRegion mr = regionOf(p.address(s), SLOT);
            assertTrue(mr != null, "slot " + s + " is not inside a registered region");
            assertEquals(mr.lkey(), p.lkey(s));
            // the view and the address name the same bytes
            p.view(s).putInt(p.offset(s), 0x5a5a0000 + i);
        }
        for (int i = 0; i < slots.size(); i++) {
            int s = slots.get(i);
            assertEquals(0x5a5a0000 + i, p.view(s).getInt(p.offset(s)), "slot " + s + " overlaps another");
        }
        assertEquals(2 * PER_REGION, p.capacity(), "a second region once the first was used up, not before");
        assertEquals(2 * REGION, p.registeredBytes());
        assertEquals(2 * REGION, loop.registeredBytes, "counted in the loop's registered bytes");
        assertEquals(2, fabric.liveMemoryRegions().size());
        assertEquals(PER_REGION + 1, p.inUse());
    }

    @Test
    void theFreeStackGivesBackTheLastSlotReleasedAndRegistersNothingMore() throws VerbsException {
        StagingPool p = pool(64L << 20);
        int a = p.acquire();
        int b = p.acquire();
        int c = p.acquire();
        assertEquals(0, a, "the lowest slots first");
        assertEquals(1, b);
        assertEquals(2, c);
        p.release(b);
        p.release(a);
        assertEquals(a, p.acquire(), "last released, first taken");
        assertEquals(b, p.acquire());
        assertEquals(3, p.acquire(), "then the untouched ones");
        for (int i = 0; i < 10_000; i++) {
            p.release(p.acquire());
        }
        assertEquals(PER_REGION, p.capacity(), "taking and giving back never grows the pool");
        assertEquals(4, p.inUse());
    }

    @Test
    void atTheCapAWriterWaitsAndIsWokenOnceBySlotsComingBackInOrder() throws VerbsException {
        StagingPool p = pool(2 * REGION);
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < 2 * PER_REGION; i++) {
            out.add(p.acquire());
        }
        assertTrue(p.canAcquire() == false, "the cap is reached");
        assertEquals(-1, p.acquire(), "no third region past the cap");
        assertEquals(2 * REGION, p.registeredBytes());
        int[] woken = new int[3];
        StagingPool.Waiter w0 = () -> woken[0]++;
        StagingPool.Waiter w1 = () -> woken[1]++;
        StagingPool.Waiter w2 = () -> woken[2]++;
        p.await(w0);
        p.await(w1);
        p.await(w2);
        p.forget(w2); // its connection went
        p.release(out.remove(0));
        assertEquals(1, woken[0], "the first to wait is woken by the first slot back");
        assertEquals(0, woken[1], "one slot wakes one waiter");
        assertTrue(p.canAcquire());
        p.release(out.remove(0));
        assertEquals(1, woken[0], "woken once");
        assertEquals(1, woken[1]);
        p.release(out.remove(0));
        assertEquals(0, woken[2], "a waiter that was forgotten is not woken");
        assertEquals(0, p.waiterCount());
    }

    @Test
    void aCapBelowOneRegionFailsTheWriteSayingWhatToChange() {
        StagingPool p = pool(REGION - 1);
        VerbsException e = assertThrows(VerbsException.class, p::acquire);
        assertTrue(e.getMessage().contains("sendStagingBytes"), e.getMessage());
        assertTrue(e.getMessage().contains("RECEIVE_BUFFER_SIZE"), e.getMessage());
        assertEquals(0, p.registeredBytes());
    }

    @Test
    void slotsLargerThanARegionComeOneARegion() throws VerbsException {
        StagingPool p = new StagingPool(pd, 4 << 20, new StagingPool.Budget(64L << 20), loop);
        assertEquals(1, p.slotsPerRegion());
        int a = p.acquire();
        int b = p.acquire();
        assertNotEquals(p.lkey(a), p.lkey(b), "a region each");
        assertEquals(8L << 20, p.registeredBytes());
    }

    @Test
    void closingWithSlotsInFlightFreesNothingUntilTheLastComesBack() throws VerbsException {
        StagingPool p = pool(64L << 20);
        int a = p.acquire();
        int b = p.acquire();
        p.scratchView();
        long address = p.address(a);
        assertFalse(p.close(), "two slots still out");
        assertTrue(regionOf(address, SLOT) != null, "the region stays registered while a work request may read it");
        assertEquals(-1, p.acquire(), "a closed pool hands out nothing");
        p.release(a);
        assertTrue(regionOf(address, SLOT) != null, "one slot is still out");
        assertEquals(REGION + StagingPool.SCRATCH_BYTES, loop.registeredBytes);
        p.release(b);
        assertTrue(regionOf(address, SLOT) == null, "freed with the last slot");
        assertEquals(0, fabric.liveMemoryRegions().size(), "the scratch too");
        assertEquals(0, loop.registeredBytes);
        assertTrue(p.close(), "closing again: nothing left");
    }

    @Test
    void theLastSendQueueLeavingFreesTheRegionsAndTheNextRegistersAgain() throws VerbsException {
        StagingPool p = pool(64L << 20);
        p.join();
        p.join();
        int a = p.acquire();
        p.release(a);
        p.leave();
        assertEquals(REGION, p.registeredBytes(), "kept while a send queue uses the pool");
        p.leave();
        assertEquals(0, p.registeredBytes(), "freed when the last leaves");
        assertEquals(0, loop.registeredBytes);
        assertEquals(0, fabric.liveMemoryRegions().size());
        p.join();
        int b = p.acquire();
        assertTrue(regionOf(p.address(b), SLOT) != null, "registered again for the next connection");
        assertEquals(REGION, loop.registeredBytes);
    }

    @Test
    void regionsGoAfterQuietTicksWithNoSlotOutAndComeBackForTheNextSend() throws VerbsException {
        StagingPool p = pool(64L << 20);
        p.join();
        p.scratchView();
        List<Integer> burst = new ArrayList<>();
        for (int i = 0; i < PER_REGION + 1; i++) {
            burst.add(p.acquire());
        }
        long burstBytes = 2 * REGION + StagingPool.SCRATCH_BYTES;
        assertEquals(burstBytes, loop.registeredBytes);
        // a slot out: however long the quiet, nothing goes (a work request may read it)
        int stuck = burst.remove(burst.size() - 1);
        for (int s : burst) {
            p.release(s);
        }
        for (int i = 0; i < 2 * StagingPool.IDLE_TICKS; i++) {
            p.tick();
        }
        assertEquals(burstBytes, p.registeredBytes(), "freed with a slot out");
        p.release(stuck);
        p.release(p.acquire()); // a SEND: the quiet starts again (the tick that sees it is not quiet)
        quietTicks(p, 3, burstBytes);
        p.release(p.acquire()); // ... and again
        quietTicks(p, StagingPool.IDLE_TICKS + 1, burstBytes);
        assertEquals(StagingPool.SCRATCH_BYTES, p.registeredBytes(), "the regions go, the scratch stays");
        assertEquals(StagingPool.SCRATCH_BYTES, loop.registeredBytes);
        assertEquals(1, fabric.liveMemoryRegions().size(), "the scratch's region only");
        assertTrue(p.canAcquire(), "the budget counts the freed regions out");
        int next = p.acquire();
        assertTrue(regionOf(p.address(next), SLOT) != null, "registered again for the next SEND");
        assertEquals(REGION + StagingPool.SCRATCH_BYTES, loop.registeredBytes);
        p.release(next);
        p.leave();
        assertEquals(0, loop.registeredBytes, "the last send queue leaving frees the rest");
        assertEquals(0, fabric.liveMemoryRegions().size());
    }

    /** {@code n} ticks, before each of which {@code p} still holds {@code bytes}. */
    private static void quietTicks(StagingPool p, int n, long bytes) {
        for (int i = 0; i < n; i++) {
            assertEquals(bytes, p.registeredBytes(), "freed after " + i + " ticks");
            p.tick();
        }
    }

    @Test
    void theScratchIsRegisteredOnceOnFirstUse() throws VerbsException {
        StagingPool p = pool(64L << 20);
        p.scratchView().putInt(0, 42);
        MemoryRegion mr = regionOf(p.scratchAddress(), 24);
        assertTrue(mr != null);
        assertEquals(mr.lkey(), p.scratchLkey());
        p.scratchView();
        assertEquals(StagingPool.SCRATCH_BYTES, p.registeredBytes());
        assertEquals(1, fabric.liveMemoryRegions().size());
    }
}
