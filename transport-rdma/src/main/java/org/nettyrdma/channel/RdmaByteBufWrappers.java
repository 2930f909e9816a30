package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Arrays;

/**
 * Netty's buffers over another buffer's bytes, as the send path looks through them. Wrappers whose
 * {@link ByteBuf#unwrap()} is the same bytes at the same indexes: the leak-detection wrappers that
 * {@code toLeakAwareBuffer} adds, and {@code Unpooled.unreleasableBuffer}; derived buffers: duplicates (same indexes
 * too) and unpooled slices (indexes shifted by the slice's start). Found by name, as they are package-private; one
 * that a Netty version doesn't have, or whose slice start cannot be read, is left out (its bytes are copied).
 */
final class RdmaByteBufWrappers {
    private static final Class<?>[] WRAPPERS = load(
            "io.netty.buffer.SimpleLeakAwareByteBuf",
            "io.netty.buffer.AdvancedLeakAwareByteBuf",
            "io.netty.buffer.UnreleasableByteBuf");
    private static final Class<?>[] DUPLICATES = load(
            "io.netty.buffer.UnpooledDuplicatedByteBuf",
            "io.netty.buffer.DuplicatedByteBuf");
    private static final Class<?> SLICE = loadOne("io.netty.buffer.AbstractUnpooledSlicedByteBuf");
    /** {@code (ByteBuf)int}: an unpooled slice's start in the buffer it {@linkplain ByteBuf#unwrap() unwraps} to. */
    private static final MethodHandle SLICE_START = sliceStart();

    private RdmaByteBufWrappers() {
    }

    static boolean isIndexPreservingWrapper(ByteBuf buf) {
        return isOneOf(buf.getClass(), WRAPPERS);
    }

    /**
     * What to add to an index of {@code buf} to get the index of the same byte in {@code buf.unwrap()}: 0 for the
     * wrappers above and duplicates, a slice's start for an unpooled slice; -1 if {@code buf} is none of these.
     * Allocates nothing.
     */
    static int indexShift(ByteBuf buf) {
        Class<?> type = buf.getClass();
        if (isOneOf(type, WRAPPERS) || isOneOf(type, DUPLICATES)) {
            return 0;
        }
        if (SLICE_START != null && SLICE.isInstance(buf)) {
            try {
                return (int) SLICE_START.invokeExact(buf);
            } catch (Throwable t) {
                return -1;
            }
        }
        return -1;
    }

    private static boolean isOneOf(Class<?> type, Class<?>[] types) {
        for (Class<?> t : types) {
            if (type == t) {
                return true;
            }
        }
        return false;
    }

    private static MethodHandle sliceStart() {
        if (SLICE == null) {
            return null;
        }
        try {
            // Netty's classes are in the same (unnamed) module as ours on a class path; on a module path that does
            // not open io.netty.buffer to us this fails, and slices are copied
            return MethodHandles.privateLookupIn(SLICE, MethodHandles.lookup())
                    .findGetter(SLICE, "adjustment", int.class)
                    .asType(MethodType.methodType(int.class, ByteBuf.class));
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    private static Class<?> loadOne(String name) {
        Class<?>[] c = load(name);
        return c.length == 1 ? c[0] : null;
    }

    private static Class<?>[] load(String... names) {
        Class<?>[] classes = new Class<?>[names.length];
        int n = 0;
        for (String name : names) {
            try {
                classes[n] = Class.forName(name, false, ByteBuf.class.getClassLoader());
                n++;
            } catch (ClassNotFoundException | LinkageError ignored) {
                // not in this Netty version: such buffers are copied instead
            }
        }
        return Arrays.copyOf(classes, n);
    }
}
