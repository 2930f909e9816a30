package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;

import java.util.Arrays;

/**
 * Netty's wrappers whose {@link ByteBuf#unwrap()} is the same bytes at the same indexes: the leak-detection wrappers
 * that {@code toLeakAwareBuffer} adds, and {@code Unpooled.unreleasableBuffer}. Found by name, as they are
 * package-private; one that a Netty version doesn't have is left out.
 */
final class RdmaByteBufWrappers {
    private static final Class<?>[] WRAPPERS = load(
            "io.netty.buffer.SimpleLeakAwareByteBuf",
            "io.netty.buffer.AdvancedLeakAwareByteBuf",
            "io.netty.buffer.UnreleasableByteBuf");

    private RdmaByteBufWrappers() {
    }

    static boolean isIndexPreservingWrapper(ByteBuf buf) {
        Class<?> type = buf.getClass();
        for (Class<?> wrapper : WRAPPERS) {
            if (type == wrapper) {
                return true;
            }
        }
        return false;
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
