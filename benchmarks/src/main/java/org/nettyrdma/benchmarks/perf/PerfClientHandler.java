package org.nettyrdma.benchmarks.perf;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.concurrent.CountDownLatch;

/**
 * The client end of a connection ({@link PerfProtocol}): runs the rounds it is given, one at a time. Latency: sends a
 * message, waits for the server's whole reply, times the round trip, repeats. Bandwidth: writes messages while the
 * channel is writable, flushing each batch, until all are written; the round ends with the server's
 * acknowledgement. Allocates nothing per message.
 */
final class PerfClientHandler extends ChannelInboundHandlerAdapter {
    private static final int LATENCY_RING = 4;

    /** One round on one connection: what to do, and what happened. */
    static final class Round {
        final byte mode;
        final int size;
        final long count;
        final boolean verify;
        /** Round-trip times in ns (latency rounds that are measured), else {@code null}. */
        final long[] samples;
        final CountDownLatch done;
        volatile long startNs;
        volatile long endNs;
        volatile Throwable failure;

        Round(byte mode, int size, long count, boolean verify, long[] samples, CountDownLatch done) {
            this.mode = mode;
            this.size = size;
            this.count = count;
            this.verify = verify;
            this.samples = samples;
            this.done = done;
        }
    }

    private final MessageReader reader = new MessageReader();
    private final ByteBuffer ack = ByteBuffer.allocate(PerfProtocol.ACK_LENGTH);
    private final Runnable writeTask = this::writeMore;
    private ChannelHandlerContext ctx;
    private MessageRing ring;
    private Round round;
    private long sent;
    private long sentNs;
    private boolean writing;

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        if (ring != null) {
            ring.release();
            ring = null;
        }
    }

    /** Starts {@code r}; runs on the channel's event loop. */
    void start(Round r) {
        if (round != null) {
            r.failure = new IllegalStateException("a round is still running");
            r.done.countDown();
            return;
        }
        if (!ctx.channel().isActive()) {
            r.failure = new IOException("connection closed");
            r.done.countDown();
            return;
        }
        int ringSize = r.mode == PerfProtocol.MODE_LATENCY ? LATENCY_RING
                : MessageRing.countFor(r.size, ctx.channel().config().getWriteBufferHighWaterMark());
        if (ring == null || ring.size() != r.size || ring.count() != ringSize) {
            if (ring != null) {
                ring.release();
            }
            ring = new MessageRing(ctx.alloc(), r.size, ringSize);
        }
        round = r;
        reader.reset(r.size, r.verify);
        ack.clear();
        sent = 0;
        ByteBuf request = ctx.alloc().buffer(PerfProtocol.REQUEST_LENGTH)
                .writeInt(PerfProtocol.MAGIC).writeByte(r.mode).writeByte(r.verify ? PerfProtocol.FLAG_VERIFY : 0)
                .writeShort(0).writeInt(r.size).writeLong(r.count).writeInt(0);
        r.startNs = System.nanoTime();
        ctx.write(request, ctx.voidPromise());
        writeMore();
    }

    /** Latency: the next message if none is out; bandwidth: messages while the channel is writable. */
    private void writeMore() {
        Round r = round;
        if (r == null || writing) { // write() and flush() may fire channelWritabilityChanged
            return;
        }
        writing = true;
        boolean ringBusy = false;
        if (r.mode == PerfProtocol.MODE_LATENCY) {
            if (sent == reader.messages() && sent < r.count) {
                ByteBuf message = ring.next(sent);
                if (message == null) {
                    ringBusy = true;
                } else {
                    sent++;
                    sentNs = System.nanoTime();
                    ctx.write(message, ctx.voidPromise());
                }
            }
        } else {
            while (sent < r.count && ctx.channel().isWritable()) {
                ByteBuf message = ring.next(sent);
                if (message == null) {
                    ringBusy = true;
                    break;
                }
                sent++;
                ctx.write(message, ctx.voidPromise());
            }
        }
        ctx.flush();
        writing = false;
        if (ringBusy || r.mode == PerfProtocol.MODE_BANDWIDTH && sent < r.count && ctx.channel().isWritable()) {
            // every buffer of the ring is still held by the transport or the receiver, or the flush made the channel
            // writable again while writing (that event was ignored): go on after the loop's other work
            ctx.executor().execute(writeTask);
        }
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (ctx.channel().isWritable()) {
            writeMore();
        }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf in = (ByteBuf) msg;
        try {
            while (in.isReadable()) {
                Round r = round;
                if (r == null) {
                    throw new IOException(in.readableBytes() + " bytes from the server outside a round");
                }
                if (r.mode == PerfProtocol.MODE_LATENCY && reader.messages() < r.count) {
                    if (reader.read(in)) {
                        long nowNs = System.nanoTime();
                        if (r.samples != null) {
                            r.samples[(int) reader.messages() - 1] = nowNs - sentNs;
                        }
                        writeMore();
                    }
                } else {
                    int n = Math.min(in.readableBytes(), ack.remaining());
                    in.readBytes(ack.array(), ack.position(), n);
                    ack.position(ack.position() + n);
                    if (!ack.hasRemaining()) {
                        finish(r);
                    }
                }
            }
        } catch (IOException e) {
            fail(e);
            ctx.close();
        } finally {
            in.release();
        }
    }

    private void finish(Round r) throws IOException {
        r.endNs = System.nanoTime();
        long bytes = ack.getLong(0);
        long errors = ack.getLong(8);
        long expected = r.count * r.size;
        if (bytes != expected) {
            throw new IOException("the server received " + bytes + " bytes, not " + expected);
        }
        if (errors != 0) {
            throw new IOException("the server found " + errors + " corrupt pieces of messages");
        }
        if (reader.errors() != 0) {
            throw new IOException(reader.errors() + " corrupt pieces of replies, the first: " + reader.firstError());
        }
        if (r.mode == PerfProtocol.MODE_LATENCY && reader.bytes() != expected) {
            throw new IOException("received " + reader.bytes() + " bytes of replies, not " + expected);
        }
        round = null;
        r.done.countDown();
    }

    private void fail(Throwable cause) {
        Round r = round;
        if (r != null) {
            round = null;
            r.failure = cause;
            r.done.countDown();
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        fail(new IOException("connection closed during a round"));
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        fail(cause);
        ctx.close();
    }
}
