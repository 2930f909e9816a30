package org.nettyrdma.channel;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannelConfig;

import java.util.Map;

import static io.netty.channel.ChannelOption.ALLOW_HALF_CLOSURE;
import static io.netty.channel.ChannelOption.IP_TOS;
import static io.netty.channel.ChannelOption.SO_KEEPALIVE;
import static io.netty.channel.ChannelOption.SO_LINGER;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;
import static io.netty.channel.ChannelOption.SO_SNDBUF;
import static io.netty.channel.ChannelOption.TCP_NODELAY;

/**
 * The configuration of an {@link RdmaSocketChannel}. TCP's socket options are accepted so that existing bootstraps
 * run unchanged; only {@code SO_LINGER} (0: close aborts) and {@code ALLOW_HALF_CLOSURE} act on an RDMA connection,
 * the others are kept and reported but change nothing (docs/configuration.md).
 */
public final class RdmaSocketChannelConfig extends DefaultChannelConfig implements SocketChannelConfig {
    private volatile boolean allowHalfClosure;
    private volatile boolean tcpNoDelay = true;
    private volatile boolean keepAlive;
    private volatile boolean reuseAddress;
    private volatile int sendBufferSize = 4 << 20;
    private volatile int receiveBufferSizeHint = 65536;
    private volatile int soLinger = -1;
    private volatile int trafficClass;
    private volatile int receiveBufferSize = 16384;
    private volatile int receiveBufferCount = 16;
    private volatile int zeroCopyThreshold = 1024;
    private volatile int closeTimeoutMillis = 10_000;
    private volatile int maxLentReceiveBytes = 4 << 20;
    private volatile boolean writeRing = Boolean.getBoolean("org.nettyrdma.writeRing");
    private volatile int ringSize = 1 << 20;
    private volatile boolean rendezvous = Boolean.getBoolean("org.nettyrdma.rendezvous");
    private volatile int rendezvousThreshold = Integer.getInteger("org.nettyrdma.rendezvousThreshold", 1 << 20);
    private volatile int keepAliveMillis = Integer.getInteger("org.nettyrdma.keepAliveMillis", 5000);

    RdmaSocketChannelConfig(RdmaSocketChannel channel) {
        super(channel);
        setAllocator(RdmaByteBufAllocator.DEFAULT);
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), SO_RCVBUF, SO_SNDBUF, TCP_NODELAY, SO_KEEPALIVE, SO_REUSEADDR, SO_LINGER,
                IP_TOS, ALLOW_HALF_CLOSURE, RdmaChannelOption.RECEIVE_BUFFER_SIZE,
                RdmaChannelOption.RECEIVE_BUFFER_COUNT, RdmaChannelOption.ZERO_COPY_THRESHOLD,
                RdmaChannelOption.CLOSE_TIMEOUT_MILLIS, RdmaChannelOption.MAX_LENT_RECEIVE_BYTES,
                RdmaChannelOption.WRITE_RING, RdmaChannelOption.RING_SIZE, RdmaChannelOption.KEEPALIVE_MILLIS,
                RdmaChannelOption.RENDEZVOUS, RdmaChannelOption.RENDEZVOUS_THRESHOLD);
    }

    @SuppressWarnings("unchecked")
    @Override
    public <T> T getOption(ChannelOption<T> option) {
        if (option == SO_RCVBUF) {
            return (T) Integer.valueOf(getReceiveBufferSize());
        }
        if (option == SO_SNDBUF) {
            return (T) Integer.valueOf(getSendBufferSize());
        }
        if (option == TCP_NODELAY) {
            return (T) Boolean.valueOf(isTcpNoDelay());
        }
        if (option == SO_KEEPALIVE) {
            return (T) Boolean.valueOf(isKeepAlive());
        }
        if (option == SO_REUSEADDR) {
            return (T) Boolean.valueOf(isReuseAddress());
        }
        if (option == SO_LINGER) {
            return (T) Integer.valueOf(getSoLinger());
        }
        if (option == IP_TOS) {
            return (T) Integer.valueOf(getTrafficClass());
        }
        if (option == ALLOW_HALF_CLOSURE) {
            return (T) Boolean.valueOf(isAllowHalfClosure());
        }
        if (option == RdmaChannelOption.RECEIVE_BUFFER_SIZE) {
            return (T) Integer.valueOf(getRdmaReceiveBufferSize());
        }
        if (option == RdmaChannelOption.RECEIVE_BUFFER_COUNT) {
            return (T) Integer.valueOf(getRdmaReceiveBufferCount());
        }
        if (option == RdmaChannelOption.ZERO_COPY_THRESHOLD) {
            return (T) Integer.valueOf(getZeroCopyThreshold());
        }
        if (option == RdmaChannelOption.CLOSE_TIMEOUT_MILLIS) {
            return (T) Integer.valueOf(getCloseTimeoutMillis());
        }
        if (option == RdmaChannelOption.KEEPALIVE_MILLIS) {
            return (T) Integer.valueOf(getKeepAliveMillis());
        }
        if (option == RdmaChannelOption.MAX_LENT_RECEIVE_BYTES) {
            return (T) Integer.valueOf(getMaxLentReceiveBytes());
        }
        if (option == RdmaChannelOption.WRITE_RING) {
            return (T) Boolean.valueOf(isWriteRing());
        }
        if (option == RdmaChannelOption.RING_SIZE) {
            return (T) Integer.valueOf(getRingSize());
        }
        if (option == RdmaChannelOption.RENDEZVOUS) {
            return (T) Boolean.valueOf(isRendezvous());
        }
        if (option == RdmaChannelOption.RENDEZVOUS_THRESHOLD) {
            return (T) Integer.valueOf(getRendezvousThreshold());
        }
        return super.getOption(option);
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == SO_RCVBUF) {
            setReceiveBufferSize((Integer) value);
        } else if (option == SO_SNDBUF) {
            setSendBufferSize((Integer) value);
        } else if (option == TCP_NODELAY) {
            setTcpNoDelay((Boolean) value);
        } else if (option == SO_KEEPALIVE) {
            setKeepAlive((Boolean) value);
        } else if (option == SO_REUSEADDR) {
            setReuseAddress((Boolean) value);
        } else if (option == SO_LINGER) {
            setSoLinger((Integer) value);
        } else if (option == IP_TOS) {
            setTrafficClass((Integer) value);
        } else if (option == ALLOW_HALF_CLOSURE) {
            setAllowHalfClosure((Boolean) value);
        } else if (option == RdmaChannelOption.RECEIVE_BUFFER_SIZE) {
            setRdmaReceiveBufferSize((Integer) value);
        } else if (option == RdmaChannelOption.RECEIVE_BUFFER_COUNT) {
            setRdmaReceiveBufferCount((Integer) value);
        } else if (option == RdmaChannelOption.ZERO_COPY_THRESHOLD) {
            setZeroCopyThreshold((Integer) value);
        } else if (option == RdmaChannelOption.CLOSE_TIMEOUT_MILLIS) {
            setCloseTimeoutMillis((Integer) value);
        } else if (option == RdmaChannelOption.KEEPALIVE_MILLIS) {
            setKeepAliveMillis((Integer) value);
        } else if (option == RdmaChannelOption.MAX_LENT_RECEIVE_BYTES) {
            setMaxLentReceiveBytes((Integer) value);
        } else if (option == RdmaChannelOption.WRITE_RING) {
            setWriteRing((Boolean) value);
        } else if (option == RdmaChannelOption.RING_SIZE) {
            setRingSize((Integer) value);
        } else if (option == RdmaChannelOption.RENDEZVOUS) {
            setRendezvous((Boolean) value);
        } else if (option == RdmaChannelOption.RENDEZVOUS_THRESHOLD) {
            setRendezvousThreshold((Integer) value);
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    /** Bytes per receive buffer; the peer's messages are at most this long (header included). */
    public int getRdmaReceiveBufferSize() {
        return receiveBufferSize;
    }

    public RdmaSocketChannelConfig setRdmaReceiveBufferSize(int size) {
        if (size < 64 || size > 1 << 24) {
            throw new IllegalArgumentException("RECEIVE_BUFFER_SIZE: " + size + " (expected 64 .. 16 MiB)");
        }
        receiveBufferSize = size;
        return this;
    }

    public int getRdmaReceiveBufferCount() {
        return receiveBufferCount;
    }

    public RdmaSocketChannelConfig setRdmaReceiveBufferCount(int count) {
        if (count < 4 || count > 4096) {
            throw new IllegalArgumentException("RECEIVE_BUFFER_COUNT: " + count + " (expected 4 .. 4096)");
        }
        receiveBufferCount = count;
        return this;
    }

    public int getZeroCopyThreshold() {
        return zeroCopyThreshold;
    }

    public RdmaSocketChannelConfig setZeroCopyThreshold(int threshold) {
        if (threshold < 0) {
            throw new IllegalArgumentException("ZERO_COPY_THRESHOLD: " + threshold + " (expected >= 0)");
        }
        zeroCopyThreshold = threshold;
        return this;
    }

    public int getCloseTimeoutMillis() {
        return closeTimeoutMillis;
    }

    public RdmaSocketChannelConfig setCloseTimeoutMillis(int millis) {
        if (millis < 0) {
            throw new IllegalArgumentException("CLOSE_TIMEOUT_MILLIS: " + millis + " (expected >= 0)");
        }
        closeTimeoutMillis = millis;
        return this;
    }

    /** Milliseconds of silence before a connection probes its peer; 0: never ({@link RdmaChannelOption#KEEPALIVE_MILLIS}). */
    public int getKeepAliveMillis() {
        return keepAliveMillis;
    }

    public RdmaSocketChannelConfig setKeepAliveMillis(int millis) {
        if (millis < 0) {
            throw new IllegalArgumentException("KEEPALIVE_MILLIS: " + millis + " (expected >= 0; 0: no probes)");
        }
        keepAliveMillis = millis;
        return this;
    }

    /** Bytes of receive buffers this channel lends to its pipeline at most (then it copies). */
    public int getMaxLentReceiveBytes() {
        return maxLentReceiveBytes;
    }

    public RdmaSocketChannelConfig setMaxLentReceiveBytes(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("MAX_LENT_RECEIVE_BYTES: " + bytes + " (expected >= 0)");
        }
        maxLentReceiveBytes = bytes;
        return this;
    }

    /** Whether this side offers protocol v2's WRITE ring in its handshake. */
    public boolean isWriteRing() {
        return writeRing;
    }

    public RdmaSocketChannelConfig setWriteRing(boolean writeRing) {
        this.writeRing = writeRing;
        return this;
    }

    /** Bytes of the ring this side exposes to its peer for RDMA WRITEs, when the WRITE ring is used. */
    public int getRingSize() {
        return ringSize;
    }

    public RdmaSocketChannelConfig setRingSize(int bytes) {
        if (bytes < 64 << 10 || bytes > 1 << 30) {
            throw new IllegalArgumentException("RING_SIZE: " + bytes + " (expected 64 KiB .. 1 GiB)");
        }
        ringSize = bytes;
        return this;
    }

    /** Whether this side offers protocol v2's READ rendezvous in its handshake. */
    public boolean isRendezvous() {
        return rendezvous;
    }

    public RdmaSocketChannelConfig setRendezvous(boolean rendezvous) {
        this.rendezvous = rendezvous;
        return this;
    }

    /** Readable bytes a buffer needs at least to go by READ rendezvous. */
    public int getRendezvousThreshold() {
        return rendezvousThreshold;
    }

    public RdmaSocketChannelConfig setRendezvousThreshold(int bytes) {
        if (bytes < 1) {
            throw new IllegalArgumentException("RENDEZVOUS_THRESHOLD: " + bytes + " (expected at least 1)");
        }
        rendezvousThreshold = bytes;
        return this;
    }

    @Override
    public int getReceiveBufferSize() {
        return receiveBufferSizeHint;
    }

    @Override
    public RdmaSocketChannelConfig setReceiveBufferSize(int receiveBufferSize) {
        if (receiveBufferSize <= 0) { // as a socket's (a hint only here: RECEIVE_BUFFER_SIZE and _COUNT decide)
            throw new IllegalArgumentException("SO_RCVBUF: " + receiveBufferSize + " (expected > 0)");
        }
        this.receiveBufferSizeHint = receiveBufferSize;
        return this;
    }

    @Override
    public int getSendBufferSize() {
        return sendBufferSize;
    }

    @Override
    public RdmaSocketChannelConfig setSendBufferSize(int sendBufferSize) {
        if (sendBufferSize <= 0) { // as a socket's; here it bounds the bytes a close or shutdownOutput() takes along
            throw new IllegalArgumentException("SO_SNDBUF: " + sendBufferSize + " (expected > 0)");
        }
        this.sendBufferSize = sendBufferSize;
        return this;
    }

    @Override
    public int getSoLinger() {
        return soLinger;
    }

    @Override
    public RdmaSocketChannelConfig setSoLinger(int soLinger) {
        this.soLinger = soLinger;
        return this;
    }

    @Override
    public int getTrafficClass() {
        return trafficClass;
    }

    @Override
    public RdmaSocketChannelConfig setTrafficClass(int trafficClass) {
        this.trafficClass = trafficClass;
        return this;
    }

    @Override
    public boolean isKeepAlive() {
        return keepAlive;
    }

    @Override
    public RdmaSocketChannelConfig setKeepAlive(boolean keepAlive) {
        this.keepAlive = keepAlive;
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return reuseAddress;
    }

    @Override
    public RdmaSocketChannelConfig setReuseAddress(boolean reuseAddress) {
        this.reuseAddress = reuseAddress;
        return this;
    }

    @Override
    public boolean isTcpNoDelay() {
        return tcpNoDelay;
    }

    @Override
    public RdmaSocketChannelConfig setTcpNoDelay(boolean tcpNoDelay) {
        this.tcpNoDelay = tcpNoDelay;
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }

    @Override
    public boolean isAllowHalfClosure() {
        return allowHalfClosure;
    }

    @Override
    public RdmaSocketChannelConfig setAllowHalfClosure(boolean allowHalfClosure) {
        this.allowHalfClosure = allowHalfClosure;
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setConnectTimeoutMillis(int connectTimeoutMillis) {
        super.setConnectTimeoutMillis(connectTimeoutMillis);
        return this;
    }

    @Override
    @Deprecated
    public RdmaSocketChannelConfig setMaxMessagesPerRead(int maxMessagesPerRead) {
        super.setMaxMessagesPerRead(maxMessagesPerRead);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteSpinCount(int writeSpinCount) {
        super.setWriteSpinCount(writeSpinCount);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAllocator(ByteBufAllocator allocator) {
        super.setAllocator(allocator);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator allocator) {
        super.setRecvByteBufAllocator(allocator);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAutoRead(boolean autoRead) {
        super.setAutoRead(autoRead);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAutoClose(boolean autoClose) {
        super.setAutoClose(autoClose);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteBufferHighWaterMark(int writeBufferHighWaterMark) {
        super.setWriteBufferHighWaterMark(writeBufferHighWaterMark);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteBufferLowWaterMark(int writeBufferLowWaterMark) {
        super.setWriteBufferLowWaterMark(writeBufferLowWaterMark);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark writeBufferWaterMark) {
        super.setWriteBufferWaterMark(writeBufferWaterMark);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setMessageSizeEstimator(MessageSizeEstimator estimator) {
        super.setMessageSizeEstimator(estimator);
        return this;
    }
}
