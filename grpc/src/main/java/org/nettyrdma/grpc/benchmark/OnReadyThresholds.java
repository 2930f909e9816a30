package org.nettyrdma.grpc.benchmark;

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
 * Interceptors that set every call's on-ready threshold (gRPC's default is 32 KiB), for the benchmark's
 * {@code rdma-ready} row: gRPC counts a message's bytes as queued until its write completes, which over RDMA is the
 * SEND's completion.
 */
final class OnReadyThresholds {
    private OnReadyThresholds() {
    }

    static ServerInterceptor server(int bytes) {
        return new ServerInterceptor() {
            @Override
            public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                               ServerCallHandler<Q, R> next) {
                call.setOnReadyThreshold(bytes);
                return next.startCall(call, headers);
            }
        };
    }

    static ClientInterceptor client(int bytes) {
        return new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options,
                                                         Channel next) {
                return next.newCall(method, options.withOnReadyThreshold(bytes));
            }
        };
    }
}
