package org.nettyrdma.testing;

import io.netty.util.ResourceLeakDetector;

/**
 * The resource leak detector of this module's tests: Netty's, which still logs each leak, and which also hands each
 * leak to {@link LeakRecorder}, so that {@link LeakCheckExtension} fails the test class it was reported in.
 *
 * <p>Netty creates its detectors (one per resource type: {@code ByteBuf}, {@code HashedWheelTimer}, SSL engines, ...)
 * through {@link io.netty.util.ResourceLeakDetectorFactory}, which instantiates this class by name when the JVM runs
 * with {@code -Dio.netty.customResourceLeakDetector=org.nettyrdma.testing.FailingLeakDetector} (the surefire
 * {@code argLine} of transport-rdma/pom.xml). The factory looks up the public {@code (Class, int)} and
 * {@code (Class, int, long)} constructors, with the system class loader.
 */
public class FailingLeakDetector<T> extends ResourceLeakDetector<T> {

    public FailingLeakDetector(Class<?> resourceType, int samplingInterval) {
        super(resourceType, samplingInterval);
        LeakRecorder.register(this);
    }

    /** The factory's deprecated variant; {@code maxActive} is ignored by Netty too. */
    @SuppressWarnings("deprecation")
    public FailingLeakDetector(Class<?> resourceType, int samplingInterval, long maxActive) {
        super(resourceType, samplingInterval, maxActive);
        LeakRecorder.register(this);
    }

    /** Always: Netty's default skips the leak reports altogether when its logger has ERROR disabled. */
    @Override
    protected boolean needReport() {
        return true;
    }

    @Override
    protected void reportTracedLeak(String resourceType, String records) {
        super.reportTracedLeak(resourceType, records);
        LeakRecorder.record(resourceType, records);
    }

    @Override
    protected void reportUntracedLeak(String resourceType) {
        super.reportUntracedLeak(resourceType);
        LeakRecorder.record(resourceType, "");
    }

    /** Tags what is allocated inside {@link LeakRecorder#expectLeaks}, so that those leaks are told apart. */
    @Override
    protected Object getInitialHint(String resourceType) {
        return LeakRecorder.initialHint();
    }
}
