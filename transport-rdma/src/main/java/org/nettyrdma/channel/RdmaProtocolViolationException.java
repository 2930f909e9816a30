package org.nettyrdma.channel;

import java.io.IOException;

/**
 * The peer broke the wire protocol (docs/protocol.md): a malformed message or more credits than it has receive
 * buffers. The channel fires it and closes abortively; nothing the peer sent after the violation is delivered.
 */
public final class RdmaProtocolViolationException extends IOException {
    private static final long serialVersionUID = 1L;

    RdmaProtocolViolationException(String message) {
        super(message);
    }
}
