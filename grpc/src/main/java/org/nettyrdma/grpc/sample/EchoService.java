package org.nettyrdma.grpc.sample;

import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;

import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * The server's side of {@code Echo} ({@link EchoMethods}): Unary answers the request; ServerStream sends the pattern's
 * messages as fast as the call is ready for them (gRPC's flow control, no buffering beyond it) and stops when the
 * client cancels; ClientStream answers how many messages and bytes arrived and their CRC-32C; Bidi echoes each message.
 */
public final class EchoService {
    private EchoService() {
    }

    public static ServerServiceDefinition definition() {
        return ServerServiceDefinition.builder(EchoMethods.SERVICE)
                .addMethod(EchoMethods.UNARY, ServerCalls.asyncUnaryCall((request, response) -> {
                    response.onNext(request);
                    response.onCompleted();
                }))
                .addMethod(EchoMethods.SERVER_STREAM, ServerCalls.asyncServerStreamingCall(
                        (request, response) -> new PatternStream(request,
                                (ServerCallStreamObserver<Chunk>) response).start()))
                .addMethod(EchoMethods.CLIENT_STREAM, ServerCalls.asyncClientStreamingCall(Summing::new))
                .addMethod(EchoMethods.BIDI, ServerCalls.asyncBidiStreamingCall(Echoing::new))
                .build();
    }

    /** ServerStream: sends while the call is ready, resumes from the onReady callback. */
    private static final class PatternStream {
        private final StreamRequest request;
        private final ServerCallStreamObserver<Chunk> call;
        private long next;
        private boolean done;

        PatternStream(StreamRequest request, ServerCallStreamObserver<Chunk> call) {
            this.request = request;
            this.call = call;
        }

        void start() {
            if (request.getCount() < 0 || request.getPayloadSize() < 0) {
                call.onError(Status.INVALID_ARGUMENT.withDescription("negative count or size").asRuntimeException());
                return;
            }
            call.setOnCancelHandler(() -> { });
            call.setOnReadyHandler(this::drain);
            drain();
        }

        private synchronized void drain() {
            while (!done && !call.isCancelled() && call.isReady() && next < request.getCount()) {
                call.onNext(PayloadPattern.chunk(next++, request.getPayloadSize()));
            }
            if (!done && !call.isCancelled() && next == request.getCount()) {
                done = true;
                call.onCompleted();
            }
        }
    }

    /** Bidi: echoes each message. */
    private static final class Echoing implements StreamObserver<Chunk> {
        private final StreamObserver<Chunk> response;

        Echoing(StreamObserver<Chunk> response) {
            this.response = response;
        }

        @Override
        public void onNext(Chunk value) {
            response.onNext(value);
        }

        @Override
        public void onError(Throwable t) {
            // the client cancelled or the connection ended: nothing to answer
        }

        @Override
        public void onCompleted() {
            response.onCompleted();
        }
    }

    /** ClientStream: counts and checksums. */
    private static final class Summing implements StreamObserver<Chunk> {
        private final StreamObserver<Summary> response;
        private final CRC32C crc = new CRC32C();
        private long messages;
        private long bytes;

        Summing(StreamObserver<Summary> response) {
            this.response = response;
        }

        @Override
        public void onNext(Chunk value) {
            messages++;
            bytes += value.getPayload().size();
            for (ByteBuffer b : value.getPayload().asReadOnlyByteBufferList()) {
                crc.update(b);
            }
        }

        @Override
        public void onError(Throwable t) {
            // the client cancelled or the connection ended: nothing to answer
        }

        @Override
        public void onCompleted() {
            response.onNext(Summary.newBuilder().setMessages(messages).setBytes(bytes).setCrc32C(crc.getValue())
                    .build());
            response.onCompleted();
        }
    }
}
