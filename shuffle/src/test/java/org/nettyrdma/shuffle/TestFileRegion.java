package org.nettyrdma.shuffle;

import io.netty.channel.FileRegion;
import io.netty.util.AbstractReferenceCounted;

/**
 * What the tests' {@link FileRegion}s share: position 0, progress in {@link #transferred}, and reference counting that
 * returns the region. Subclasses say what they count and write.
 */
abstract class TestFileRegion extends AbstractReferenceCounted implements FileRegion {
    /** Progress, as {@link #transferred()} reports it. */
    protected long transferred;

    @Override
    public long position() {
        return 0;
    }

    @Override
    @Deprecated
    public long transfered() {
        return transferred;
    }

    @Override
    public long transferred() {
        return transferred;
    }

    @Override
    public FileRegion retain() {
        super.retain();
        return this;
    }

    @Override
    public FileRegion retain(int increment) {
        super.retain(increment);
        return this;
    }

    @Override
    public FileRegion touch() {
        return this;
    }

    @Override
    public FileRegion touch(Object hint) {
        return this;
    }

    @Override
    protected void deallocate() {
    }
}
