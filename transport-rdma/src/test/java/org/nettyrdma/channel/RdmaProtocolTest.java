package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.nettyrdma.channel.RdmaProtocol.DONE_MESSAGE_LENGTH;
import static org.nettyrdma.channel.RdmaProtocol.FLAG_POOLED_CREDITS;
import static org.nettyrdma.channel.RdmaProtocol.FLAG_READ_RENDEZVOUS;
import static org.nettyrdma.channel.RdmaProtocol.FLAG_WRITE_RING;
import static org.nettyrdma.channel.RdmaProtocol.HEADER_LENGTH;
import static org.nettyrdma.channel.RdmaProtocol.RING_CREDIT_LENGTH;
import static org.nettyrdma.channel.RdmaProtocol.RING_MESSAGE_LENGTH;
import static org.nettyrdma.channel.RdmaProtocol.RNDV_MESSAGE_LENGTH;
import static org.nettyrdma.channel.RdmaProtocol.TYPE_CREDIT;
import static org.nettyrdma.channel.RdmaProtocol.TYPE_DATA;
import static org.nettyrdma.channel.RdmaProtocol.TYPE_DONE;
import static org.nettyrdma.channel.RdmaProtocol.TYPE_FIN;
import static org.nettyrdma.channel.RdmaProtocol.TYPE_RING;
import static org.nettyrdma.channel.RdmaProtocol.TYPE_RNDV;
import static org.nettyrdma.channel.RdmaProtocol.checkHeader;

/**
 * The message checks every received SEND goes through ({@link RdmaProtocol#checkHeader}): which types each negotiated
 * path admits, and the format of each; the READ rendezvous' RNDV and DONE messages, written and read back.
 */
class RdmaProtocolTest {
    private static final int ALL = FLAG_WRITE_RING | FLAG_POOLED_CREDITS | FLAG_READ_RENDEZVOUS;

    /** A message of {@code length} bytes (at least the header) with the header's type, second byte and credits. */
    private static ByteBuf message(int type, int second, int credits, int length) {
        ByteBuffer b = ByteBuffer.allocate(Math.max(length, HEADER_LENGTH));
        RdmaProtocol.putHeader(b, 0, type, second, credits);
        return Unpooled.wrappedBuffer(b);
    }

    private static ByteBuf rendezvous(int length, int flags) {
        ByteBuffer b = ByteBuffer.allocate(RNDV_MESSAGE_LENGTH);
        RdmaProtocol.putRendezvous(b, 0, 3, 7, length, 0x1234_5678_9abcL, 0xfeed_0001);
        b.putInt(HEADER_LENGTH + 20, flags);
        return Unpooled.wrappedBuffer(b);
    }

    @Test
    void v1MessagesAreCheckedWhateverThePaths() {
        for (int paths : new int[] {0, FLAG_WRITE_RING, FLAG_POOLED_CREDITS, FLAG_READ_RENDEZVOUS, ALL}) {
            assertNull(checkHeader(message(TYPE_DATA, 0, 5, 100), 100, paths));
            assertNull(checkHeader(message(TYPE_CREDIT, 0, 5, 4), 4, paths));
            assertNull(checkHeader(message(TYPE_FIN, 0, 0, 4), 4, paths));
            assertEquals("sent a message of 3 bytes, shorter than the 4-byte header",
                    checkHeader(message(TYPE_DATA, 0, 0, 4), 3, paths));
            assertEquals("sent a DATA message without payload", checkHeader(message(TYPE_DATA, 0, 0, 4), 4, paths));
            assertEquals("sent a FIN message with 2 bytes of payload", checkHeader(message(TYPE_FIN, 0, 0, 6), 6, paths));
            assertEquals("sent a header whose reserved byte is 9, not 0",
                    checkHeader(message(TYPE_DATA, 9, 0, 10), 10, paths));
            assertEquals("sent a message of unknown type 7", checkHeader(message(7, 0, 0, 10), 10, paths));
            assertEquals("sent a message of unknown type 0", checkHeader(message(0, 0, 0, 10), 10, paths));
        }
    }

    @Test
    void eachPathAdmitsItsOwnMessagesOnly() {
        assertEquals("sent a message of unknown type 4 (a RING message, but the WRITE ring was not negotiated)",
                checkHeader(message(TYPE_RING, 0, 0, RING_MESSAGE_LENGTH), RING_MESSAGE_LENGTH, FLAG_POOLED_CREDITS));
        assertNull(checkHeader(message(TYPE_RING, 0, 0, RING_MESSAGE_LENGTH), RING_MESSAGE_LENGTH, FLAG_WRITE_RING));
        assertEquals("sent a RING message of 21 bytes, not 20",
                checkHeader(message(TYPE_RING, 0, 0, 21), 21, FLAG_WRITE_RING));
        assertEquals("sent a header whose reserved byte is 1, not 0",
                checkHeader(message(TYPE_RING, 1, 0, RING_MESSAGE_LENGTH), RING_MESSAGE_LENGTH, FLAG_WRITE_RING));
        assertNull(checkHeader(message(TYPE_CREDIT, 0, 1, 8), RING_CREDIT_LENGTH, FLAG_WRITE_RING));
        assertEquals("sent a CREDIT message with 4 bytes of payload",
                checkHeader(message(TYPE_CREDIT, 0, 1, 8), RING_CREDIT_LENGTH, FLAG_READ_RENDEZVOUS));
        assertNull(checkHeader(message(TYPE_CREDIT, 12, 0, 4), 4, FLAG_POOLED_CREDITS), "returned credits");
        assertEquals("sent a header whose reserved byte is 12, not 0",
                checkHeader(message(TYPE_CREDIT, 12, 0, 4), 4, FLAG_WRITE_RING));
        for (int type : new int[] {TYPE_RNDV, TYPE_DONE}) {
            int length = type == TYPE_RNDV ? RNDV_MESSAGE_LENGTH : DONE_MESSAGE_LENGTH;
            assertEquals("sent a message of unknown type " + type + " (a rendezvous message, but the READ rendezvous "
                    + "was not negotiated)", checkHeader(message(type, 0, 0, length), length,
                    FLAG_WRITE_RING | FLAG_POOLED_CREDITS));
        }
    }

    @Test
    void rendezvousMessagesAreWrittenAndReadBack() {
        ByteBuf rndv = rendezvous(8 << 20, 0);
        assertNull(checkHeader(rndv, RNDV_MESSAGE_LENGTH, FLAG_READ_RENDEZVOUS));
        assertNull(checkHeader(rndv, RNDV_MESSAGE_LENGTH, ALL));
        assertEquals(TYPE_RNDV, RdmaProtocol.headerType(rndv));
        assertEquals(3, RdmaProtocol.headerCredits(rndv), "an RNDV grants credits as any header");
        assertEquals(7, RdmaProtocol.rendezvousId(rndv));
        assertEquals(8 << 20, RdmaProtocol.rendezvousLength(rndv));
        assertEquals(0x1234_5678_9abcL, RdmaProtocol.rendezvousAddress(rndv));
        assertEquals(0xfeed_0001, RdmaProtocol.rendezvousRkey(rndv));
        assertEquals(Integer.MAX_VALUE, RdmaProtocol.rendezvousLength(rendezvous(Integer.MAX_VALUE, 0)));
        assertNull(checkHeader(rendezvous(1, 0), RNDV_MESSAGE_LENGTH, FLAG_READ_RENDEZVOUS));

        ByteBuffer b = ByteBuffer.allocate(DONE_MESSAGE_LENGTH);
        RdmaProtocol.putDone(b, 0, -2);
        ByteBuf done = Unpooled.wrappedBuffer(b);
        assertNull(checkHeader(done, DONE_MESSAGE_LENGTH, FLAG_READ_RENDEZVOUS));
        assertEquals(TYPE_DONE, RdmaProtocol.headerType(done));
        assertEquals(0, RdmaProtocol.headerCredits(done));
        assertEquals(-2, RdmaProtocol.rendezvousId(done), "ids wrap: 2^32 - 2");
    }

    /** What a hostile peer may put in an RNDV or a DONE that the format alone rules out. */
    @Test
    void malformedRendezvousMessagesAreRejected() {
        int p = FLAG_READ_RENDEZVOUS;
        assertEquals("sent an RNDV message of 27 bytes, not 28", checkHeader(rendezvous(64, 0), 27, p));
        assertEquals("sent an RNDV message of 4 bytes, not 28", checkHeader(message(TYPE_RNDV, 0, 0, 4), 4, p));
        assertEquals("sent an RNDV message announcing 0 bytes (1 to 2147483647 are allowed)",
                checkHeader(rendezvous(0, 0), RNDV_MESSAGE_LENGTH, p));
        assertEquals("sent an RNDV message announcing 2147483648 bytes (1 to 2147483647 are allowed)",
                checkHeader(rendezvous(Integer.MIN_VALUE, 0), RNDV_MESSAGE_LENGTH, p));
        assertEquals("sent an RNDV message announcing 4294967295 bytes (1 to 2147483647 are allowed)",
                checkHeader(rendezvous(-1, 0), RNDV_MESSAGE_LENGTH, p));
        assertEquals("sent an RNDV message with unknown flags 0x1",
                checkHeader(rendezvous(64, 1), RNDV_MESSAGE_LENGTH, p));
        assertEquals("sent an RNDV message with unknown flags 0x80000000",
                checkHeader(rendezvous(64, Integer.MIN_VALUE), RNDV_MESSAGE_LENGTH, p));
        assertEquals("sent a header whose reserved byte is 2, not 0",
                checkHeader(message(TYPE_RNDV, 2, 0, RNDV_MESSAGE_LENGTH), RNDV_MESSAGE_LENGTH, p));
        assertEquals("sent a DONE message of 4 bytes, not 8", checkHeader(message(TYPE_DONE, 0, 0, 4), 4, p));
        assertEquals("sent a DONE message of 12 bytes, not 8", checkHeader(message(TYPE_DONE, 0, 0, 12), 12, p));
        assertEquals("sent a DONE message granting 1 credits (a DONE grants none)",
                checkHeader(message(TYPE_DONE, 0, 1, DONE_MESSAGE_LENGTH), DONE_MESSAGE_LENGTH, p));
        assertEquals("sent a header whose reserved byte is 1, not 0",
                checkHeader(message(TYPE_DONE, 1, 0, DONE_MESSAGE_LENGTH), DONE_MESSAGE_LENGTH, p));
    }
}
