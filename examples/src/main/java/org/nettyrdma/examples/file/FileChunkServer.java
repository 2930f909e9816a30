package org.nettyrdma.examples.file;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
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
import java.util.HexFormat;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/** Sends a file in chunks: {@code FileChunkServer host port file [--emulated] | --self-test [MiB [address]]}. */
public final class FileChunkServer {
    private static final Logger logger = LogManager.getLogger(FileChunkServer.class);
    /** Bytes per chunk ChunkedWriteHandler reads from the file into a buffer of the channel's allocator. */
    private static final int CHUNK = 65536;

    private FileChunkServer() {
    }

    public static void main(String[] args) throws Exception {
        List<String> argList = Arrays.asList(args);
        int selfTest = argList.indexOf("--self-test");
        if (selfTest >= 0) {
            int mebibytes = args.length > selfTest + 1 ? Integer.parseInt(args[selfTest + 1]) : 64;
            System.exit(selfTest(mebibytes, args.length > selfTest + 2 ? args[selfTest + 2] : null) ? 0 : 1);
        }
        if (args.length < 3) {
            System.err.println("usage: FileChunkServer host port file [--emulated]"
                    + " | FileChunkServer --self-test [MiB [address]]");
            System.exit(2);
        }
        Transport transport = Transport.rdma(argList.contains("--emulated"));
        EventLoopGroup group = transport.newGroup(0);
        try {
            Path file = Paths.get(args[2]);
            Channel server = start(transport, group, new InetSocketAddress(args[0], Integer.parseInt(args[1])), file);
            logger.info("serving {} ({} bytes) on {} over {}", file, Files.size(file), server.localAddress(),
                    transport);
            server.closeFuture().sync();
        } finally {
            group.shutdownGracefully();
        }
    }

    /** Serves {@code file}: each connection gets its length (8 bytes), its SHA-256 (32 bytes), then its bytes. */
    public static Channel start(Transport transport, EventLoopGroup group, InetSocketAddress address, Path file)
            throws IOException, InterruptedException {
        long length = Files.size(file);
        byte[] sha256 = sha256(file);
        return transport.serverBootstrap(group)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new ChunkedWriteHandler(), new FileSender(file, length, sha256));
                    }
                })
                .bind(address).sync().channel();
    }

    /**
     * Writes a file of {@code mebibytes} MiB of random bytes, serves it on {@code address} over native RDMA
     * ({@link Transport#nativeRdmaOn}), else on 127.0.0.1 over the emulated provider, receives it, compares digests.
     */
    private static boolean selfTest(int mebibytes, String address) {
        boolean nativeRdma = address != null && Transport.nativeRdmaOn(address);
        Transport transport = Transport.rdma(nativeRdma ? RdmaIoHandlerConfig.PROVIDER_NATIVE
                : RdmaIoHandlerConfig.PROVIDER_EMULATED);
        EventLoopGroup serverGroup = transport.newGroup(1);
        EventLoopGroup clientGroup = transport.newGroup(1);
        Path file = null;
        try {
            file = Files.createTempFile("netty-rdma-file-", ".bin");
            writeRandom(file, (long) mebibytes << 20);
            Channel server = start(transport, serverGroup,
                    new InetSocketAddress(nativeRdma ? address : "127.0.0.1", 0), file);
            FileChunkClient.Result result = FileChunkClient.receive(transport, clientGroup,
                    (InetSocketAddress) server.localAddress());
            String expected = HexFormat.of().formatHex(sha256(file));
            if (result.length() != Files.size(file) || !result.sha256().equals(expected)) {
                logger.error("self-test failed: received {} bytes with SHA-256 {}; the file has {} bytes, SHA-256 {}",
                        result.length(), result.sha256(), Files.size(file), expected);
                return false;
            }
            logger.info("self-test passed: {} MiB file received over {} in {} ms ({} MB/s), SHA-256 {} matches",
                    mebibytes, transport, TimeUnit.NANOSECONDS.toMillis(result.elapsedNs()),
                    (long) (result.length() * 1e3 / result.elapsedNs()), expected);
            server.close().sync();
            return true;
        } catch (Exception e) {
            logger.error("self-test failed", e);
            return false;
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            if (file != null) {
                try {
                    Files.deleteIfExists(file);
                } catch (IOException e) {
                    logger.warn("cannot delete {}: {}", file, e.toString());
                }
            }
        }
    }

    private static void writeRandom(Path file, long length) throws IOException {
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

    /** Sends the header, then the file through ChunkedWriteHandler, then closes the connection. */
    private static final class FileSender extends ChannelInboundHandlerAdapter {
        private final Path file;
        private final long length;
        private final byte[] sha256;

        FileSender(Path file, long length, byte[] sha256) {
            this.file = file;
            this.length = length;
            this.sha256 = sha256;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) throws IOException {
            ctx.write(ctx.alloc().buffer(8 + sha256.length).writeLong(length).writeBytes(sha256), ctx.voidPromise());
            ctx.writeAndFlush(new ChunkedNioFile(FileChannel.open(file), CHUNK)).addListener(f -> {
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
