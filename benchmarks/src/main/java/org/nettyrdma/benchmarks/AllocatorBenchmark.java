package org.nettyrdma.benchmarks;

import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.util.concurrent.FastThreadLocalThread;
import org.nettyrdma.channel.RdmaByteBufAllocator;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

import java.util.concurrent.TimeUnit;

/**
 * Allocate and release one direct buffer: the transport's {@link RdmaByteBufAllocator} (registered memory; the
 * regions are not registered with any device here, which happens once per region when it is first sent from)
 * against Netty's {@link PooledByteBufAllocator#DEFAULT} and {@link AdaptiveByteBufAllocator}. The benchmark thread is
 * a {@code FastThreadLocalThread}, as an event loop is, and leak detection is off, so that every allocator runs as on
 * a transport's hot path.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(jvmArgsAppend = {"-Dio.netty.leakDetection.level=disabled", "-Djmh.executor=CUSTOM",
        "-Djmh.executor.class=org.nettyrdma.benchmarks.FastThreadLocalExecutor"})
public class AllocatorBenchmark {
    /** Buffer size in bytes. */
    @Param({"64", "1024", "16384", "65536"})
    public int size;

    /** rdma: {@link RdmaByteBufAllocator}; pooled: {@link PooledByteBufAllocator#DEFAULT}; adaptive. */
    @Param({"rdma", "pooled", "adaptive"})
    public String allocator;

    private ByteBufAllocator alloc;

    @Setup
    public void setUp() {
        switch (allocator) {
            case "rdma":
                alloc = new RdmaByteBufAllocator();
                break;
            case "pooled":
                alloc = PooledByteBufAllocator.DEFAULT;
                break;
            case "adaptive":
                alloc = new AdaptiveByteBufAllocator();
                break;
            default:
                throw new IllegalArgumentException("allocator " + allocator);
        }
        if (!(Thread.currentThread() instanceof FastThreadLocalThread)) {
            throw new IllegalStateException("run with -Djmh.executor=CUSTOM -Djmh.executor.class="
                    + FastThreadLocalExecutor.class.getName() + " (this class's @Fork does)");
        }
    }

    /** One direct buffer of {@code size} bytes, allocated and released. */
    @Benchmark
    public int allocateRelease() {
        ByteBuf buf = alloc.directBuffer(size);
        int capacity = buf.capacity();
        buf.release();
        return capacity;
    }
}
