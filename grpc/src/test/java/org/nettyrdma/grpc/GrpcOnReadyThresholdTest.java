package org.nettyrdma.grpc;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.grpc.sample.Chunk;
import org.nettyrdma.grpc.sample.EchoMethods;
import org.nettyrdma.grpc.sample.PayloadPattern;
import org.nettyrdma.grpc.sample.StreamRequest;
import org.nettyrdma.grpc.sample.Summary;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link RdmaGrpc}'s on-ready threshold: gRPC counts a message as queued until the transport's write of it completed,
 * so with gRPC's 32 KiB a call is not ready again after one 64 KiB message until that message was sent. With
 * RdmaGrpc's configuration a call stays ready over three, on the server and on the client; a call's own threshold
 * still wins.
 */
class GrpcOnReadyThresholdTest {
    private static final int MESSAGE = 64 << 10;
    private static final int MESSAGES = 3;

    @Test
    void theClientInterceptorSetsTheThresholdUnlessTheCallNamedOne() {
        List<CallOptions> seen = new ArrayList<>();
        Channel next = new Channel() {
            @Override
            public <Q, R> ClientCall<Q, R> newCall(MethodDescriptor<Q, R> method, CallOptions options) {
                seen.add(options);
                return null;
            }

            @Override
            public String authority() {
                return "test";
            }
        };
        OnReadyThresholds.client(RdmaGrpc.ON_READY_THRESHOLD).interceptCall(EchoMethods.UNARY, CallOptions.DEFAULT,
                next);
        OnReadyThresholds.client(RdmaGrpc.ON_READY_THRESHOLD).interceptCall(EchoMethods.UNARY,
                CallOptions.DEFAULT.withOnReadyThreshold(4096), next);
        assertEquals(RdmaGrpc.ON_READY_THRESHOLD, seen.get(0).getOnReadyThreshold(), "a call without one of its own");
        assertEquals(4096, seen.get(1).getOnReadyThreshold(), "a call that named its own");
        assertThrows(IllegalArgumentException.class, () -> OnReadyThresholds.server(0));
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aServerCallStaysReadyOverSeveralLargeMessages() throws Exception {
        List<Boolean> ready = new ArrayList<>();
        try (Setup s = new Setup(service(ready))) {
            Iterator<Chunk> it = ClientCalls.blockingServerStreamingCall(s.channel, EchoMethods.SERVER_STREAM,
                    CallOptions.DEFAULT, StreamRequest.getDefaultInstance());
            for (int i = 0; i < MESSAGES; i++) {
                assertTrue(PayloadPattern.matches(it.next(), i, MESSAGE), "message " + i);
            }
            assertFalse(it.hasNext(), "the stream ends after " + MESSAGES + " messages");
        }
        assertEquals(List.of(true, true, true), ready,
                "the server call's isReady() after each 64 KiB message, written one after another");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aClientCallStaysReadyOverSeveralLargeMessages() throws Exception {
        try (Setup s = new Setup(service(new ArrayList<>()))) {
            ClientCall<Chunk, Summary> call = s.channel.newCall(EchoMethods.CLIENT_STREAM, CallOptions.DEFAULT);
            CompletableFuture<Void> onReady = new CompletableFuture<>();
            CompletableFuture<Summary> summary = new CompletableFuture<>();
            call.start(new ClientCall.Listener<>() {
                @Override
                public void onMessage(Summary message) {
                    summary.complete(message);
                }

                @Override
                public void onReady() {
                    onReady.complete(null);
                }

                @Override
                public void onClose(Status status, Metadata trailers) {
                    if (!status.isOk()) {
                        summary.completeExceptionally(status.asRuntimeException(trailers));
                    }
                    onReady.complete(null);
                }
            }, new Metadata());
            call.request(1);
            onReady.get(30, TimeUnit.SECONDS);
            List<Boolean> ready = new ArrayList<>();
            for (int i = 0; i < MESSAGES; i++) {
                call.sendMessage(PayloadPattern.chunk(i, MESSAGE));
                ready.add(call.isReady());
            }
            call.halfClose();
            assertEquals(MESSAGES, summary.get(30, TimeUnit.SECONDS).getMessages(), "messages the server counted");
            assertEquals(List.of(true, true, true), ready,
                    "the client call's isReady() after each 64 KiB message, sent one after another");
        }
    }

    /**
     * ServerStream: {@link #MESSAGES} messages of 64 KiB written at once, whatever the request, {@code ready} noting
     * isReady() after each; ClientStream: counts the messages.
     */
    private static ServerServiceDefinition service(List<Boolean> ready) {
        return ServerServiceDefinition.builder(EchoMethods.SERVICE)
                .addMethod(EchoMethods.UNARY, ServerCalls.asyncUnaryCall((request, response) -> {
                    response.onNext(request);
                    response.onCompleted();
                }))
                .addMethod(EchoMethods.SERVER_STREAM, ServerCalls.asyncServerStreamingCall((request, response) -> {
                    ServerCallStreamObserver<Chunk> call = (ServerCallStreamObserver<Chunk>) response;
                    for (int i = 0; i < MESSAGES; i++) {
                        call.onNext(PayloadPattern.chunk(i, MESSAGE));
                        synchronized (ready) {
                            ready.add(call.isReady());
                        }
                    }
                    call.onCompleted();
                }))
                .addMethod(EchoMethods.CLIENT_STREAM, ServerCalls.asyncClientStreamingCall(
                        response -> new StreamObserver<Chunk>() {
                            private long messages;

                            @Override
                            public void onNext(Chunk value) {
                                messages++;
                            }

                            @Override
                            public void onError(Throwable t) {
                            }

                            @Override
                            public void onCompleted() {
                                response.onNext(Summary.newBuilder().setMessages(messages).build());
                                response.onCompleted();
                            }
                        }))
                .addMethod(EchoMethods.BIDI, ServerCalls.asyncBidiStreamingCall(response -> response))
                .build();
    }

    /** A server with {@code service} in this JVM and a channel to it, both configured by {@link RdmaGrpc}. */
    private static final class Setup implements AutoCloseable {
        private final EventLoopGroup group = GrpcTestSupport.newGroup(2);
        private final Server server;
        private final ManagedChannel channel;

        Setup(ServerServiceDefinition service) throws Exception {
            server = RdmaGrpc.configure(NettyServerBuilder.forAddress(
                    new InetSocketAddress(GrpcTestSupport.address(), 0)), group).addService(service).build().start();
            InetSocketAddress bound = (InetSocketAddress) server.getListenSockets().get(0);
            channel = RdmaGrpc.configure(NettyChannelBuilder.forAddress(
                    new InetSocketAddress(GrpcTestSupport.address(), bound.getPort())), group).usePlaintext().build();
        }

        @Override
        public void close() throws Exception {
            try {
                GrpcTestSupport.close(channel);
                server.shutdownNow().awaitTermination(30, TimeUnit.SECONDS);
            } finally {
                GrpcTestSupport.shutdown(group);
            }
        }
    }
}
