package org.nettyrdma.examples.file;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.handler.stream.ChunkedNioFile;
import io.netty.handler.stream.ChunkedWriteHandler;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.examples.Transport;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Sends a file: {@code FileChunkServer host port file [--region] [--emulated] | --self-test [MiB [address]] [--region]
 * [--compare]}. In chunks through {@code ChunkedWriteHandler}, or with {@code --region} as one {@link DefaultFileRegion},
 * exactly as a TCP file server does (over epoll that is {@code sendfile}). {@code --compare}: the self-test also sends
 * the file over Netty epoll (TCP, NIO where epoll is missing) on the same address, and prints both.
 */
public final class FileChunkServer {
    private static final Logger logger = LogManager.getLogger(FileChunkServer.class);
    /** Bytes per chunk ChunkedWriteHandler reads from the file into a buffer of the channel's allocator. */
    private static final int CHUNK = 65536;

    private FileChunkServer() {
    }

    public static void main(String[] args) throws Exception {
        List<String> argList = Arrays.asList(args);
        boolean region = argList.contains("--region");
        List<String> positional = new ArrayList<>();
        for (String a : args) {
            if (!a.startsWith("--")) {
                positional.add(a);
            }
        }
        if (argList.contains("--self-test")) {
            int mebibytes = positional.isEmpty() ? 64 : Integer.parseInt(positional.get(0));
            String address = positional.size() > 1 ? positional.get(1) : null;
            System.exit(selfTest(mebibytes, address, region, argList.contains("--compare")) ? 0 : 1);
        }
        if (positional.size() < 3) {
            System.err.println("usage: FileChunkServer host port file [--region] [--emulated]"
                    + " | FileChunkServer --self-test [MiB [address]] [--region] [--compare]");
            System.exit(2);
        }
        args = positional.toArray(new String[0]);
        Transport transport = Transport.rdma(argList.contains("--emulated"));
        EventLoopGroup group = transport.newGroup(0);
        try {
            Path file = Paths.get(args[2]);
            Channel server = start(transport, group, new InetSocketAddress(args[0], Integer.parseInt(args[1])), file,
                    region);
            logger.info("serving {} ({} bytes) on {} over {}", file, Files.size(file), server.localAddress(),
                    transport);
            server.closeFuture().sync();
        } finally {
            group.shutdownGracefully();
        }
    }

    /**
     * Serves {@code file}: each connection gets its length (8 bytes), its SHA-256 (32 bytes), then its bytes, in chunks
     * or (with {@code region}) as one {@link DefaultFileRegion}.
     */
    public static Channel start(Transport transport, EventLoopGroup group, InetSocketAddress address, Path file,
                                boolean region) throws IOException, InterruptedException {
        return start(transport, group, address, file, Files.size(file), sha256(file), region);
    }

    /** As {@link #start(Transport, EventLoopGroup, InetSocketAddress, Path, boolean)}, its length and digest known. */
    static Channel start(Transport transport, EventLoopGroup group, InetSocketAddress address, Path file, long length,
                         byte[] sha256, boolean region) throws InterruptedException {
        return transport.serverBootstrap(group)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new ChunkedWriteHandler(), new FileSender(file, length, sha256, region));
                    }
                })
                .bind(address).sync().channel();
    }

    /**
     * Writes a file of {@code mebibytes} MiB of random bytes, serves it on {@code address} over native RDMA
     * ({@link Transport#nativeRdmaOn}), else on 127.0.0.1 over the emulated provider, receives it, compares digests;
     * with {@code compare}, then over TCP (epoll, else NIO) on the same address.
     */
    static boolean selfTest(int mebibytes, String address, boolean region, boolean compare) {
        boolean nativeRdma = address != null && Transport.nativeRdmaOn(address);
        String host = nativeRdma ? address : "127.0.0.1";
        List<Transport> transports = new ArrayList<>();
        transports.add(Transport.rdma(nativeRdma ? RdmaIoHandlerConfig.PROVIDER_NATIVE
                : RdmaIoHandlerConfig.PROVIDER_EMULATED));
        if (compare) {
            transports.add(Epoll.isAvailable() ? Transport.epoll() : Transport.nio());
        }
        Path file = null;
        try {
            file = Files.createTempFile("netty-rdma-file-", ".bin");
            writeRandom(file, (long) mebibytes << 20);
            String expected = HexFormat.of().formatHex(sha256(file));
            for (Transport transport : transports) {
                if (!sendAndCheck(transport, host, file, region, expected, mebibytes)) {
                    return false;
                }
            }
            return true;
        } catch (Exception e) {
            logger.error("self-test failed", e);
            return false;
        } finally {
            if (file != null) {
                try {
                    Files.deleteIfExists(file);
                } catch (IOException e) {
                    logger.warn("cannot delete {}: {}", file, e.toString());
                }
            }
        }
    }

    private static boolean sendAndCheck(Transport transport, String host, Path file, boolean region, String expected,
                                        int mebibytes) throws Exception {
        EventLoopGroup serverGroup = transport.newGroup(1);
        EventLoopGroup clientGroup = transport.newGroup(1);
        try {
            Channel server = start(transport, serverGroup, new InetSocketAddress(host, 0), file, region);
            FileChunkClient.Result result = FileChunkClient.receive(transport, clientGroup,
                    (InetSocketAddress) server.localAddress());
            server.close().sync();
            if (result.length() != Files.size(file) || !result.sha256().equals(expected)) {
                logger.error("self-test failed over {}: received {} bytes with SHA-256 {}; the file has {} bytes, "
                        + "SHA-256 {}", transport, result.length(), result.sha256(), Files.size(file), expected);
                return false;
            }
            logger.info("self-test passed: {} MiB file sent {} over {} in {} ms ({} MB/s), SHA-256 {} matches",
                    mebibytes, region ? "as a DefaultFileRegion" : "in chunks", transport,
                    TimeUnit.NANOSECONDS.toMillis(result.elapsedNs()),
                    (long) (result.length() * 1e3 / result.elapsedNs()), expected);
            return true;
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    static void writeRandom(Path file, long length) throws IOException {
        SplittableRandom random = new SplittableRandom(1);
        byte[] block = new byte[CHUNK];
        try (OutputStream out = Files.newOutputStream(file)) {
            for (long done = 0; done < length; done += block.length) {
                random.nextBytes(block);
                out.write(block, 0, (int) Math.min(block.length, length - done));
            }
        }
    }

    static byte[] sha256(Path file) throws IOException {
        MessageDigest digest = newSha256();
        try (InputStream in = new DigestInputStream(Files.newInputStream(file), digest)) {
            in.transferTo(OutputStream.nullOutputStream());
        }
        return digest.digest();
    }

    static MessageDigest newSha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Sends the header, then the file (through ChunkedWriteHandler, or as a region), then closes the connection. */
    private static final class FileSender extends ChannelInboundHandlerAdapter {
        private final Path file;
        private final long length;
        private final byte[] sha256;
        private final boolean region;

        FileSender(Path file, long length, byte[] sha256, boolean region) {
            this.file = file;
            this.length = length;
            this.sha256 = sha256;
            this.region = region;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) throws IOException {
            ctx.write(ctx.alloc().buffer(8 + sha256.length).writeLong(length).writeBytes(sha256), ctx.voidPromise());
            Object body = region ? new DefaultFileRegion(file.toFile(), 0, length)
                    : new ChunkedNioFile(FileChannel.open(file), CHUNK);
            ctx.writeAndFlush(body).addListener(f -> {
                if (!f.isSuccess()) {
                    logger.warn("{}: sending {} failed: {}", ctx.channel(), file, f.cause().toString());
                }
                ctx.close();
            });
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            logger.warn("{}: closing after {}", ctx.channel(), cause.toString());
            ctx.close();
        }
    }
}
