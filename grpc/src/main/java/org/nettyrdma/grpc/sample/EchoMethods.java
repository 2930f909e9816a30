package org.nettyrdma.grpc.sample;

import com.google.protobuf.Descriptors;
import com.google.protobuf.Message;
import io.grpc.MethodDescriptor;
import io.grpc.ServiceDescriptor;
import io.grpc.protobuf.ProtoUtils;

import java.util.Map;

/**
 * gRPC's descriptors of the {@code Echo} service of {@code echo.proto}, read from the file descriptor that protoc
 * generated ({@link EchoProto}): method names, kinds (unary, server, client or bidi streaming) and message types come
 * from the .proto; the marshallers are protobuf's. This is what protoc-gen-grpc-java would generate as
 * {@code EchoGrpc}'s descriptors (its linux-x86_64 executable is not available to this build).
 */
public final class EchoMethods {
    public static final Descriptors.ServiceDescriptor PROTO = EchoProto.getDescriptor().findServiceByName("Echo");
    public static final String SERVICE_NAME = PROTO.getFullName();
    private static final Map<String, Message> MESSAGES = Map.of(
            Chunk.getDescriptor().getFullName(), Chunk.getDefaultInstance(),
            StreamRequest.getDescriptor().getFullName(), StreamRequest.getDefaultInstance(),
            Summary.getDescriptor().getFullName(), Summary.getDefaultInstance());

    public static final MethodDescriptor<Chunk, Chunk> UNARY = method("Unary");
    public static final MethodDescriptor<StreamRequest, Chunk> SERVER_STREAM = method("ServerStream");
    public static final MethodDescriptor<Chunk, Summary> CLIENT_STREAM = method("ClientStream");
    public static final MethodDescriptor<Chunk, Chunk> BIDI = method("Bidi");
    public static final ServiceDescriptor SERVICE = ServiceDescriptor.newBuilder(SERVICE_NAME)
            .addMethod(UNARY).addMethod(SERVER_STREAM).addMethod(CLIENT_STREAM).addMethod(BIDI)
            .build();

    private EchoMethods() {
    }

    @SuppressWarnings("unchecked")
    private static <Q extends Message, R extends Message> MethodDescriptor<Q, R> method(String name) {
        Descriptors.MethodDescriptor m = PROTO.findMethodByName(name);
        if (m == null) {
            throw new IllegalStateException("echo.proto has no method " + name + " in " + SERVICE_NAME);
        }
        return MethodDescriptor.<Q, R>newBuilder()
                .setType(kind(m))
                .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE_NAME, m.getName()))
                .setRequestMarshaller(ProtoUtils.marshaller((Q) message(m.getInputType())))
                .setResponseMarshaller(ProtoUtils.marshaller((R) message(m.getOutputType())))
                .build();
    }

    private static MethodDescriptor.MethodType kind(Descriptors.MethodDescriptor m) {
        if (m.isClientStreaming()) {
            return m.isServerStreaming() ? MethodDescriptor.MethodType.BIDI_STREAMING
                    : MethodDescriptor.MethodType.CLIENT_STREAMING;
        }
        return m.isServerStreaming() ? MethodDescriptor.MethodType.SERVER_STREAMING
                : MethodDescriptor.MethodType.UNARY;
    }

    private static Message message(Descriptors.Descriptor type) {
        Message m = MESSAGES.get(type.getFullName());
        if (m == null) {
            throw new IllegalStateException("no Java message for " + type.getFullName());
        }
        return m;
    }
}
