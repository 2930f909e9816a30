package org.nettyrdma.verbs.jni;

/** {@link NativeFacts} from the native library of this process. */
final class SystemNativeFacts implements NativeFacts {
    static final SystemNativeFacts INSTANCE = new SystemNativeFacts();

    private SystemNativeFacts() {
    }

    @Override
    public Throwable loadFailure() {
        return Native.loadFailure();
    }

    @Override
    public int deviceCount() {
        return Native.deviceCount();
    }

    @Override
    public long memlockLimit() {
        return Native.memlockLimit();
    }
}
