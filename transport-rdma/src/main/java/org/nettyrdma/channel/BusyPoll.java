package org.nettyrdma.channel;

/**
 * How long an idle {@link RdmaIoHandler} busy-polls before it arms its completion queues and blocks.
 *
 * <p>Fixed: the configured spin, every idle period. With the back-off, only while spinning pays: after
 * {@value #MISS_LIMIT} spins in a row that found nothing (no completion, no task) the loop blocks at once, but for one
 * idle period in {@value #PROBE_INTERVAL}, which spins the whole budget (a probe); a spin that finds something spins
 * again from the next idle period. A loop whose gaps are longer than the spin (gRPC's calls: the reply waits for the
 * peer's loop, then its application thread, then its loop again) gives the CPU back to the threads that produce its
 * work instead of spinning it away before every wait. Not the default: two loops that answer each other both back off
 * together (each answers late because it blocked, so the other's spins miss) and stay there.
 *
 * <p>Adaptive: it keeps an exponentially weighted estimate of the idle gap (from the moment the loop found nothing to
 * do to the moment it found work again) and spins only while that estimate is at most the cap: then for twice the
 * estimate, at least an eighth of the cap and at most the cap. A ping-pong whose replies come within the cap is caught
 * spinning and pays no wake-up; a loop whose gaps are longer (a stream whose completions wait for a software NIC's
 * kernel threads on the same CPUs, a quiet connection) blocks at once and leaves the CPU to others. A gap that ended only after the loop blocked includes the wake-up; so that a loop which once saw long gaps
 * can notice short ones again, every {@value #PROBE_INTERVAL}th idle period of a blocking loop spins the whole cap
 * (a probe), and work found in a probe sets the estimate to that gap.
 *
 * <p>Event-loop thread only; a few arithmetic operations per idle period, nothing allocated.
 */
final class BusyPoll {
    /** In blocking mode, one idle period in this many spins the whole cap to measure the gap again. */
    static final int PROBE_INTERVAL = 16;
    /** Samples are clamped to this many caps, so that one long pause moves the estimate a bounded amount. */
    private static final int MAX_SAMPLE_CAPS = 2;
    /** Fixed mode: spins in a row that found nothing, after which the loop blocks at once (but for probes). */
    static final int MISS_LIMIT = 8;

    private final boolean adaptive;
    private final boolean backOff;
    private final long capNs;
    private final long floorNs;
    private long estimateNs;
    private int blockedIdles;
    private boolean probing;
    /** Fixed mode: spins in a row that found nothing (at most {@link #MISS_LIMIT}). */
    private int misses;

    private BusyPoll(boolean adaptive, boolean backOff, long capNs) {
        this.adaptive = adaptive;
        this.backOff = backOff;
        this.capNs = capNs;
        this.floorNs = capNs / 8;
    }

    /** Always spins {@code spinNs} (0: never). */
    static BusyPoll fixed(long spinNs) {
        return new BusyPoll(false, false, spinNs);
    }

    /** Spins {@code spinNs} (0: never) while spins find work; backs off after {@value #MISS_LIMIT} that did not. */
    static BusyPoll fixedWithBackOff(long spinNs) {
        return new BusyPoll(false, true, spinNs);
    }

    /** Spins by the observed gaps, at most {@code capNs} (0: never). */
    static BusyPoll adaptive(long capNs) {
        return new BusyPoll(true, false, capNs);
    }

    static BusyPoll of(RdmaIoHandlerConfig config) {
        if (config.isAdaptiveBusyPoll()) {
            return adaptive(config.getBusyPollMaxNanos());
        }
        return config.isBusyPollBackOff() ? fixedWithBackOff(config.getBusyPollNanos())
                : fixed(config.getBusyPollNanos());
    }

    /** The loop is idle: how long to spin before blocking (0: block at once). */
    long spinNs() {
        probing = false;
        if (capNs == 0) {
            return 0;
        }
        if (!adaptive) {
            if (!backOff || misses < MISS_LIMIT) {
                return capNs;
            }
            return probe();
        }
        if (estimateNs <= capNs) {
            blockedIdles = 0;
            return Math.min(capNs, Math.max(floorNs, 2 * estimateNs));
        }
        return probe();
    }

    /** Blocking mode: 0 (block at once), or the whole cap once in {@link #PROBE_INTERVAL} idle periods. */
    private long probe() {
        if (++blockedIdles >= PROBE_INTERVAL) {
            blockedIdles = 0;
            probing = true;
            return capNs;
        }
        return 0;
    }

    /** The spin ran its whole time and found nothing: no completion, no task. */
    void onNothingWhileSpinning() {
        probing = false;
        if (misses < MISS_LIMIT) {
            misses++;
        }
    }

    /** A task came while the loop was spinning: the spin saved a wake-up (no gap to learn from). */
    void onTaskWhileSpinning() {
        probing = false;
        misses = 0;
    }

    /** Work was found {@code gapNs} after the loop went idle, while it was still spinning. */
    void onWorkWhileSpinning(long gapNs) {
        misses = 0;
        if (probing) {
            probing = false;
            estimateNs = clamp(gapNs);
        } else {
            sample(gapNs);
        }
    }

    /** Work was found {@code gapNs} after the loop went idle, once it had stopped spinning (armed, maybe blocked). */
    void onWorkAfterSpin(long gapNs) {
        probing = false;
        sample(gapNs);
    }

    private void sample(long gapNs) {
        if (adaptive) {
            estimateNs += (clamp(gapNs) - estimateNs) >> 2; // weight 1/4
        }
    }

    private long clamp(long gapNs) {
        return Math.max(0, Math.min(gapNs, MAX_SAMPLE_CAPS * capNs));
    }

    /** The current estimate of the idle gap (tests). */
    long estimateNs() {
        return estimateNs;
    }

    boolean isAdaptive() {
        return adaptive;
    }
}
