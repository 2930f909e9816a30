package org.nettyrdma.benchmarks.perf;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The server end of a connection ({@link PerfProtocol}): reads a round's request, then its messages; in latency mode
 * answers each with a message of the same size; acknowledges the round with the bytes it received and the messages
 * that failed verification. Allocates nothing per message.
 */
final class PerfServerHandler extends ChannelInboundHandlerAdapter {
    private static final int LATENCY_RING = 4;

    private final ByteBuffer request = ByteBuffer.allocate(PerfProtocol.REQUEST_LENGTH);
    private final MessageReader reader = new MessageReader();
    private final Runnable replyTask = this::reply;
    private ChannelHandlerContext ctx;
    private MessageRing ring;
    private boolean inRound;
    private byte mode;
    private int size;
    private long count;
    private long repliesOwed;
    private long repliesSent;
    private boolean ackOwed;

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

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) throws IOException {
        ByteBuf in = (ByteBuf) msg;
        try {
            while (in.isReadable()) {
                if (!inRound) {
                    readRequest(in);
                } else if (reader.read(in)) {
                    if (mode == PerfProtocol.MODE_LATENCY) {
                        repliesOwed++;
                    }
                    if (reader.messages() == count) {
                        inRound = false;
                        ackOwed = true;
                    }
                }
            }
        } finally {
            in.release();
        }
        reply();
    }

    private void readRequest(ByteBuf in) throws IOException {
        int n = Math.min(in.readableBytes(), request.remaining());
        in.readBytes(request.array(), request.position(), n);
        request.position(request.position() + n);
        if (request.hasRemaining()) {
            return;
        }
        request.flip();
        int magic = request.getInt();
        mode = request.get();
        byte flags = request.get();
        request.getShort();
        size = request.getInt();
        count = request.getLong();
        request.clear();
        if (magic != PerfProtocol.MAGIC || mode != PerfProtocol.MODE_LATENCY && mode != PerfProtocol.MODE_BANDWIDTH
                || size < PerfProtocol.MIN_SIZE || size > PerfProtocol.MAX_SIZE || count < 0) {
            throw new IOException(String.format("not a perf request (magic 0x%08x, mode %d, size %d, count %d)",
                    magic, mode, size, count));
        }
        reader.reset(size, (flags & PerfProtocol.FLAG_VERIFY) != 0);
        if (mode == PerfProtocol.MODE_LATENCY && (ring == null || ring.size() != size)) {
            if (ring != null) {
                ring.release();
            }
            ring = new MessageRing(ctx.alloc(), size, LATENCY_RING);
        }
        repliesSent = 0;
        inRound = count > 0;
        ackOwed = count == 0;
    }

    /** Sends the replies owed, then the acknowledgement if the round is over. */
    private void reply() {
        if (repliesOwed == 0 && !ackOwed) {
            return;
        }
        while (repliesOwed > 0) {
            ByteBuf message = ring.next(repliesSent);
            if (message == null) {
                // the ring's buffers are all still in flight: try again after the loop's other work
                ctx.flush();
                ctx.executor().execute(replyTask);
                return;
            }
            repliesOwed--;
            repliesSent++;
            ctx.write(message, ctx.voidPromise());
        }
        if (ackOwed) {
            ackOwed = false;
            ctx.write(ctx.alloc().buffer(PerfProtocol.ACK_LENGTH).writeLong(reader.bytes()).writeLong(reader.errors()),
                    ctx.voidPromise());
        }
        ctx.flush();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ctx.close();
    }
}
