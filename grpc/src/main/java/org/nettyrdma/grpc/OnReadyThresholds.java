package org.nettyrdma.grpc;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;

/**
 * Interceptors that set the on-ready threshold of every call: how many bytes a call may have queued in the transport
 * before {@code isReady()} turns false (gRPC's default: 32 KiB). {@link RdmaGrpc} sets {@link
 * RdmaGrpc#ON_READY_THRESHOLD} with them; they work on any transport.
 *
 * <p>A server handler still decides for its own call ({@code ServerCallStreamObserver.setOnReadyThreshold} after this
 * interceptor ran), and a client call that names a threshold in its {@link CallOptions} keeps it. A server's
 * interceptors run in the reverse order in which they were added, so one added after {@link RdmaGrpc#configure} runs
 * before this one and a threshold it sets is replaced: pass the value to {@code RdmaGrpc.configure(builder, group,
 * bytes)} instead.
 */
public final class OnReadyThresholds {
    private OnReadyThresholds() {
    }

    /** Sets {@code bytes} on every call the server starts, before its handler sees it. */
    public static ServerInterceptor server(int bytes) {
        checkPositive(bytes);
        return new ServerInterceptor() {
            @Override
            public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                               ServerCallHandler<Q, R> next) {
                call.setOnReadyThreshold(bytes);
                return next.startCall(call, headers);
            }
        };
    }

    /** Sets {@code bytes} on every call of the channel whose options name no threshold of their own. */
    public static ClientInterceptor client(int bytes) {
        checkPositive(bytes);
        return new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options,
                                                         Channel next) {
                return next.newCall(method,
                        options.getOnReadyThreshold() == null ? options.withOnReadyThreshold(bytes) : options);
            }
        };
    }

    private static void checkPositive(int bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("on-ready threshold " + bytes + ": expected a positive number of bytes");
        }
    }
}
