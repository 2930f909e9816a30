package org.nettyrdma.channel;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The busy-poll decisions, fed with gaps (no clock, no threads). */
class BusyPollTest {
    private static final long CAP = 200_000;

    @Test
    void fixedSpinsItsBudgetWhateverTheGaps() {
        BusyPoll p = BusyPoll.fixed(20_000);
        spinsItsBudgetWhateverTheGaps(p);
        for (int i = 0; i < 4 * BusyPoll.MISS_LIMIT; i++) {
            assertEquals(20_000, p.spinNs(), "spin " + i + ": without the back-off, misses do not stop the spin");
            p.onNothingWhileSpinning();
        }
        assertEquals(0, BusyPoll.fixed(0).spinNs());
        assertFalse(p.isAdaptive());
    }

    @Test
    void backOffSpinsItsBudgetWhileSpinsFindWork() {
        BusyPoll p = BusyPoll.fixedWithBackOff(20_000);
        spinsItsBudgetWhateverTheGaps(p);
        for (int i = 0; i < 100; i++) {
            assertEquals(20_000, p.spinNs());
            p.onNothingWhileSpinning();
            assertEquals(20_000, p.spinNs());
            p.onTaskWhileSpinning(); // a task during the spin: it saved a wake-up
        }
        assertEquals(20_000, p.spinNs());
        assertEquals(0, BusyPoll.fixedWithBackOff(0).spinNs());
        assertFalse(p.isAdaptive());
    }

    /** Work found after a long wait and while spinning, in turn: the spin stays the budget. */
    private static void spinsItsBudgetWhateverTheGaps(BusyPoll p) {
        for (int i = 0; i < 100; i++) {
            assertEquals(20_000, p.spinNs());
            if (i % 2 == 0) {
                p.onWorkAfterSpin(5_000_000); // (no miss reported: the spin was cut short by work after all)
            } else {
                p.onWorkWhileSpinning(3_000);
            }
        }
    }

    @Test
    void backOffStopsSpinningAfterMissesAndProbesOnceInAnInterval() {
        BusyPoll p = BusyPoll.fixedWithBackOff(20_000);
        for (int i = 0; i < BusyPoll.MISS_LIMIT; i++) {
            assertEquals(20_000, p.spinNs(), "spin " + i);
            p.onNothingWhileSpinning();
        }
        for (int round = 0; round < 3; round++) {
            int blocked = 0;
            long spin;
            while ((spin = p.spinNs()) == 0) {
                blocked++;
                p.onWorkAfterSpin(400_000); // blocked, woken by a completion
                assertTrue(blocked < BusyPoll.PROBE_INTERVAL, "no probe within the interval");
            }
            assertEquals(BusyPoll.PROBE_INTERVAL - 1, blocked);
            assertEquals(20_000, spin, "a probe spins the budget");
            p.onNothingWhileSpinning(); // the probe found nothing
        }
        // a probe that finds work: spinning again at once, for MISS_LIMIT misses
        while (p.spinNs() == 0) {
            p.onWorkAfterSpin(400_000);
        }
        p.onWorkWhileSpinning(8_000);
        for (int i = 0; i < BusyPoll.MISS_LIMIT; i++) {
            assertEquals(20_000, p.spinNs(), "spin " + i + " after a probe found work");
            p.onNothingWhileSpinning();
        }
        assertEquals(0, p.spinNs());
        // a task found by a probe counts as found too
        while (p.spinNs() == 0) {
            p.onWorkAfterSpin(400_000);
        }
        p.onTaskWhileSpinning();
        assertEquals(20_000, p.spinNs());
    }

    @Test
    void adaptiveWithoutCapNeverSpins() {
        BusyPoll p = BusyPoll.adaptive(0);
        for (int i = 0; i < 3 * BusyPoll.PROBE_INTERVAL; i++) {
            assertEquals(0, p.spinNs());
            p.onWorkAfterSpin(1_000);
        }
    }

    @Test
    void shortGapsSpinTwiceTheEstimateBetweenAnEighthOfTheCapAndTheCap() {
        BusyPoll p = BusyPoll.adaptive(CAP);
        assertEquals(CAP / 8, p.spinNs()); // nothing seen yet: the floor
        for (int i = 0; i < 50; i++) {
            p.spinNs();
            p.onWorkWhileSpinning(1_000);
        }
        assertTrue(p.estimateNs() < 2_000, "estimate " + p.estimateNs());
        assertEquals(CAP / 8, p.spinNs()); // 2 x 1 µs is below the floor
        for (int i = 0; i < 50; i++) {
            p.spinNs();
            p.onWorkWhileSpinning(60_000);
        }
        long spin = p.spinNs();
        assertTrue(spin > 110_000 && spin <= 120_000, "a 60 µs gap spins ~120 µs, was " + spin);
        for (int i = 0; i < 50; i++) {
            p.spinNs();
            p.onWorkWhileSpinning(150_000);
        }
        assertEquals(CAP, p.spinNs()); // 2 x 150 µs, capped
    }

    @Test
    void longGapsBlockAtOnceAndProbeOnceInAnInterval() {
        BusyPoll p = BusyPoll.adaptive(CAP);
        int spins = 0;
        for (int i = 0; i < 20; i++) {
            if (p.spinNs() > 0) {
                spins++;
            }
            p.onWorkAfterSpin(400_000); // every gap ended after the spin: 400 µs, above the cap
        }
        assertTrue(p.estimateNs() > CAP, "estimate " + p.estimateNs());
        assertTrue(spins < 10, "it kept spinning for long gaps: " + spins + " of 20 idle periods");
        // from here: BusyPoll.PROBE_INTERVAL - 1 blocks, then one probe of the whole cap, and again
        for (int round = 0; round < 3; round++) {
            int blocked = 0;
            long spin;
            while ((spin = p.spinNs()) == 0) {
                blocked++;
                p.onWorkAfterSpin(400_000);
                assertTrue(blocked < BusyPoll.PROBE_INTERVAL, "no probe within the interval");
            }
            assertEquals(CAP, spin, "a probe spins the cap");
            p.onWorkAfterSpin(400_000); // the probe found nothing
            if (round > 0) {
                assertEquals(BusyPoll.PROBE_INTERVAL - 1, blocked);
            }
        }
    }

    @Test
    void aProbeThatFindsAShortGapSpinsAgainAtOnce() {
        BusyPoll p = BusyPoll.adaptive(CAP);
        for (int i = 0; i < 30; i++) {
            p.spinNs();
            p.onWorkAfterSpin(10_000_000); // long pauses, clamped
        }
        assertTrue(p.estimateNs() > 3 * CAP / 2 && p.estimateNs() <= 2 * CAP, "a sample counts at most 2 caps: "
                + p.estimateNs());
        long spin;
        while ((spin = p.spinNs()) == 0) {
            p.onWorkAfterSpin(300_000); // blocked, woken: the gap with its wake-up
        }
        assertEquals(CAP, spin);
        p.onWorkWhileSpinning(30_000); // the probe caught a reply after 30 µs
        assertEquals(30_000, p.estimateNs());
        assertEquals(60_000, p.spinNs());
    }

    @Test
    void aGapThatEndsWhileSpinningAfterAShortEstimateOnlyMovesItAQuarter() {
        BusyPoll p = BusyPoll.adaptive(CAP);
        for (int i = 0; i < 50; i++) {
            p.spinNs();
            p.onWorkWhileSpinning(40_000);
        }
        long before = p.estimateNs();
        p.spinNs();
        p.onWorkAfterSpin(800_000); // one long pause, counted as 2 caps
        long after = p.estimateNs();
        assertEquals(before + (2 * CAP - before) / 4, after, 1);
        assertTrue(p.spinNs() > 0, "one long gap among short ones still spins");
    }

    @Test
    void configSelectsTheMode() {
        RdmaIoHandlerConfig c = new RdmaIoHandlerConfig().setBusyPollNanos(7_000).setAdaptiveBusyPoll(false);
        assertFalse(c.isBusyPollBackOff(), "the back-off is off by default");
        assertEquals(7_000, spinsAfterMisses(BusyPoll.of(c)), "fixed: spins after any number of misses");
        c.setBusyPollBackOff(true);
        assertEquals(0, spinsAfterMisses(BusyPoll.of(c)), "with the back-off: blocks after MISS_LIMIT misses");
        assertTrue(c.copy().isBusyPollBackOff());
        c.setAdaptiveBusyPoll(true).setBusyPollMaxNanos(80_000);
        BusyPoll adaptive = BusyPoll.of(c);
        assertTrue(adaptive.isAdaptive());
        assertEquals(10_000, adaptive.spinNs());
        RdmaIoHandlerConfig copy = c.copy();
        assertTrue(copy.isAdaptiveBusyPoll());
        assertEquals(80_000, copy.getBusyPollMaxNanos());
    }

    /** The spin a loop gets after {@link BusyPoll#MISS_LIMIT} spins in a row found nothing. */
    private static long spinsAfterMisses(BusyPoll p) {
        for (int i = 0; i < BusyPoll.MISS_LIMIT; i++) {
            p.spinNs();
            p.onNothingWhileSpinning();
        }
        return p.spinNs();
    }
}
