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
 * Sets the on-ready threshold of every call (the bytes a call may have queued and still be {@code isReady()}; gRPC's
 * default is 32 KiB) unless the call set one itself. gRPC counts a message's bytes as queued until the transport's
 * write of them completes, which over RDMA is the SEND's completion, not the copy into a socket buffer: with 32 KiB, a
 * stream of messages of 32 KiB or more has one message in flight at a time.
 */
final class OnReadyThreshold {
    private OnReadyThreshold() {
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
                return next.newCall(method, options.getOnReadyThreshold() != null ? options
                        : options.withOnReadyThreshold(bytes));
            }
        };
    }
}
