package org.nettyrdma.shuffle;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.FileRegion;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.internal.SystemPropertyUtil;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * Writes each of Spark's {@code MessageWithHeader}s as its two parts: the header {@link ByteBuf}, then the body as
 * itself (a {@link DefaultFileRegion} for a shuffle block, a {@link ByteBuf} for an RPC or a buffered chunk). Spark's
 * {@code MessageEncoder} wraps every message with a body in one {@code MessageWithHeader}, a custom {@link FileRegion}
 * that a transport can only write through its {@code transferTo}: over RDMA that means the JDK's
 * {@code FileChannel.transferTo} into a channel that is not a socket (an 8 KiB heap buffer per call, two copies into
 * send staging). Written as itself, a {@code DefaultFileRegion} is read positionally from its file into staging (one
 * copy, nothing allocated), and a ByteBuf of the registered allocator goes out with no copy.
 *
 * <p>Installed head-most, right after Spark's {@code initializePipeline} ({@link ShuffleTransport#completePipeline}),
 * on RDMA channels by default. It splits only while nothing sits between it and the channel: once Spark's SASL or AES
 * encryption puts its handlers at the head, they must see the whole message, and it passes everything through. It
 * passes through, unchanged, anything else as well: other messages, a body of another type (a {@code FileRegion}
 * subclass may override {@code transferTo}), an empty body, a message already partly transferred.
 *
 * <p>References: Spark's {@code MessageWithHeader.deallocate} releases the header, the body and the message's
 * {@code ManagedBuffer}. The header and the body are retained once each for their own writes (the transport releases
 * what it wrote), and the message's own reference, which the write was handed, is released once both writes are done,
 * successful or not: its {@code deallocate} then runs once, after the body's bytes left. The write's promise succeeds
 * when both parts are written and fails with the first failure. A header whose write fails at once is not followed by
 * its body (the body written alone would put bytes in the stream the peer would take for a frame).
 *
 * <p>Spark keeps the parts in private fields ({@code header}, {@code body}), reached through {@link VarHandle}s
 * looked up once when this class loads; where that fails (a Spark without these fields) it is said once at debug
 * level and every message passes through. Switched off with
 * {@code -Dorg.nettyrdma.shuffle.splitMessageWithHeader=false}. Event loop only; allocates per split message only
 * its completion tracker and the two parts' promises.
 */
@ChannelHandler.Sharable
public final class MessageWithHeaderSplitter extends ChannelOutboundHandlerAdapter {
    /** The system property that switches the splitting off (default true: on for RDMA channels). */
    public static final String PROPERTY = "org.nettyrdma.shuffle.splitMessageWithHeader";
    /** Its name in the pipeline. */
    public static final String NAME = "messageWithHeaderSplitter";
    static final String MESSAGE_CLASS = "org.apache.spark.network.protocol.MessageWithHeader";

    private static final InternalLogger logger = InternalLoggerFactory.getInstance(MessageWithHeaderSplitter.class);
    private static final MessageWithHeaderSplitter INSTANCE = new MessageWithHeaderSplitter();
    /** Spark's {@code MessageWithHeader}, or null when its fields are out of reach. */
    private static final Class<?> TYPE;
    /** {@code MessageWithHeader.header}: a ByteBuf. */
    private static final VarHandle HEADER;
    /** {@code MessageWithHeader.body}: a ByteBuf or a FileRegion. */
    private static final VarHandle BODY;
    private static final Throwable UNAVAILABILITY_CAUSE;

    static {
        Class<?> type = null;
        VarHandle header = null;
        VarHandle body = null;
        Throwable cause;
        try {
            type = Class.forName(MESSAGE_CLASS, false, MessageWithHeaderSplitter.class.getClassLoader());
            VarHandle[] fields = lookUp(type, "header", "body");
            header = fields[0];
            body = fields[1];
            cause = null;
        } catch (Throwable t) {
            type = null;
            cause = t;
        }
        TYPE = type;
        HEADER = header;
        BODY = body;
        UNAVAILABILITY_CAUSE = cause;
        if (cause != null) {
            logger.debug("Spark's MessageWithHeaders are written whole (through their transferTo): its private "
                    + "fields header (a ByteBuf) and body (an Object) are not accessible in this Spark version", cause);
        }
    }

    private MessageWithHeaderSplitter() {
    }

    /**
     * The handles of {@code type}'s private fields {@code headerField} (a ByteBuf) and {@code bodyField} (an Object);
     * throws what the look-up throws when they are out of reach.
     */
    static VarHandle[] lookUp(Class<?> type, String headerField, String bodyField) throws ReflectiveOperationException {
        MethodHandles.Lookup lookup = MethodHandles.privateLookupIn(type, MethodHandles.lookup());
        return new VarHandle[] {lookup.findVarHandle(type, headerField, ByteBuf.class),
                lookup.findVarHandle(type, bodyField, Object.class)};
    }

    /** Whether Spark's fields are within reach here (decided once, when the class loads). */
    public static boolean isAvailable() {
        return TYPE != null;
    }

    /** Why {@link #isAvailable()} is false, or null. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /** Whether RDMA channels get the splitter by default: available and not switched off by {@link #PROPERTY}. */
    static boolean enabledByDefault() {
        return isAvailable() && SystemPropertyUtil.getBoolean(PROPERTY, true);
    }

    /** Puts the splitter at the head of {@code pipeline} (after Spark's {@code initializePipeline}). */
    static void addTo(ChannelPipeline pipeline) {
        if (isAvailable()) {
            pipeline.addFirst(NAME, INSTANCE);
        }
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        if (msg.getClass() != TYPE || ctx.pipeline().firstContext() != ctx) {
            ctx.write(msg, promise);
            return;
        }
        FileRegion message = (FileRegion) msg;
        ByteBuf header = (ByteBuf) HEADER.get(message);
        Object body = BODY.get(message);
        long bodyBytes;
        if (body instanceof ByteBuf) {
            bodyBytes = ((ByteBuf) body).readableBytes();
        } else if (body != null && body.getClass() == DefaultFileRegion.class && ((FileRegion) body).transferred() == 0) {
            bodyBytes = ((FileRegion) body).count();
        } else {
            bodyBytes = -1;
        }
        // a message partly transferred already, or whose parts do not add up to it, is written whole
        if (bodyBytes <= 0 || message.transferred() != 0 || message.refCnt() == 0
                || message.count() != header.readableBytes() + bodyBytes) {
            ctx.write(msg, promise);
            return;
        }
        header.retain();
        ChannelFuture headerWritten = ctx.write(header, ctx.newPromise());
        if (headerWritten.isDone() && !headerWritten.isSuccess()) {
            // the header was refused (released by the channel): its body must not take its place in the stream
            message.release();
            promise.tryFailure(headerWritten.cause());
            return;
        }
        ReferenceCountUtil.retain(body);
        Split split = new Split(message, promise);
        headerWritten.addListener(split);
        ctx.write(body, ctx.newPromise()).addListener(split);
    }

    /** Completes a split message's write once both parts are written: releases the message, then its promise. */
    private static final class Split implements ChannelFutureListener {
        private final FileRegion message;
        private final ChannelPromise promise;
        private int pending = 2;
        private Throwable cause;

        Split(FileRegion message, ChannelPromise promise) {
            this.message = message;
            this.promise = promise;
        }

        @Override
        public void operationComplete(ChannelFuture future) {
            if (!future.isSuccess() && cause == null) {
                cause = future.cause();
            }
            if (--pending == 0) {
                message.release();
                if (cause == null) {
                    promise.trySuccess();
                } else {
                    promise.tryFailure(cause);
                }
            }
        }
    }
}
