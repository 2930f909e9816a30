package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Wire protocol v1 (docs/protocol.md): the handshake carried in RDMA CM private data with protocol v2's capability
 * flags, the reject reasons, and the 4-byte header that starts every SEND.
 */
final class RdmaProtocol {
    static final int MAGIC = 0x4E52444D; // "NRDM"
    static final int VERSION = 1;

    /** Handshake: magic u32, version u16, flags u16, receive buffer size u32, receive buffer count u32. */
    static final int HANDSHAKE_LENGTH = 16;
    /**
     * Handshake flag bit 0: this side can receive by an RDMA WRITE ring (protocol v2, docs/protocol.md). A path is used
     * only when both sides set its bit; bits a side does not know are ignored.
     */
    static final int FLAG_WRITE_RING = 1;
    /**
     * Handshake flag bit 1: READ rendezvous (protocol v2's second path, docs/rendezvous-design.md): this side can expose
     * a large buffer to its peer through a type-2 memory window announced by an RNDV message, READ what its peer
     * announces, and end each rendezvous with a DONE sent as SEND_WITH_INV of the window's rkey. Used when both sides
     * set it. Being built: never set by this side yet.
     */
    static final int FLAG_READ_RENDEZVOUS = 1 << 1;
    /**
     * Handshake flag bit 2: pooled credits (docs/srq-design.md, section 2). The handshake then has
     * {@link #POOLED_HANDSHAKE_LENGTH} bytes: after the 16 of v1, u32 initial credits and u32 credit limit. Used when
     * both sides set it; set only by a side whose receives come from a shared pool.
     */
    static final int FLAG_POOLED_CREDITS = 1 << 2;
    /** A handshake with {@link #FLAG_POOLED_CREDITS}: v1's 16 bytes, initial credits u32, credit limit u32. */
    static final int POOLED_HANDSHAKE_LENGTH = HANDSHAKE_LENGTH + 8;
    /**
     * Handshake flag bit 3: the probe target, bytes of zeros this side lets its peer READ, for the keep-alive probe and
     * the close fence ({@link ProbeRegion}; set on iWARP only). The handshake then has
     * {@link #PROBE_HANDSHAKE_LENGTH} bytes: the pooled extension's 8 (zeros without {@link #FLAG_POOLED_CREDITS}),
     * then address u64 and rkey u32. A peer that does not set it is probed by zero-length READs.
     */
    static final int FLAG_PROBE_TARGET = 1 << 3;
    /**
     * Handshake flag bit 4, in the accepted side's answer with pooled credits: it keeps a starving peer going (it
     * returns a single control credit to a peer that may be out of credits, and spends its last credit on a CREDIT
     * message when a DATA or FIN waits: {@link CreditWindow#keepPeerGoing}), so the connecting side's window may come
     * down to {@link CreditWindow#KEPT_FLOOR}. Read only by the connecting side, only with pooled credits.
     */
    static final int FLAG_KEEPS_PEER_GOING = 1 << 4;
    /**
     * Handshake flag bit 5: every SEND and WRITE_WITH_IMM this side posts asks for a solicited event
     * ({@code IBV_SEND_SOLICITED}), so a peer may arm its completion queue for solicited completions only and still be
     * woken by each of them ({@link SolicitedWakeups}). Set by every side of this version; a peer without it keeps
     * the loops it is on arming for every completion.
     */
    static final int FLAG_SOLICITS = 1 << 5;
    /** Where a handshake with {@link #FLAG_PROBE_TARGET} has the target's address (u64), then its rkey (u32). */
    static final int PROBE_TARGET_OFFSET = POOLED_HANDSHAKE_LENGTH;
    static final int PROBE_HANDSHAKE_LENGTH = PROBE_TARGET_OFFSET + 12;

    static final int REJECT_BAD_MAGIC = 1;
    static final int REJECT_VERSION = 2;
    static final int REJECT_NO_RESOURCES = 3;
    static final int REJECT_REFUSED = 4;
    static final int REJECT_INVALID = 5;
    /** Reject data: magic u32, version u16, reason u16, then a UTF-8 message up to the CM's 148-byte limit. */
    static final int MAX_REJECT_LENGTH = 148;

    static final int HEADER_LENGTH = 4;
    /**
     * Header: type u8, reserved u8, credits u16 (receive buffers re-posted since the last header said so). With pooled
     * credits a CREDIT message's second byte is <em>returned</em>: credits its sender gives back unspent (an idle
     * sender's surplus, so that the receiver's shared pool can let the receives go).
     */
    static final int TYPE_DATA = 1;
    static final int TYPE_CREDIT = 2;
    static final int TYPE_FIN = 3;
    /** Protocol v2: where this side's WRITE ring is (payload: address u64, length u32, rkey u32). */
    static final int TYPE_RING = 4;
    /**
     * Protocol v2's CREDIT message, when the WRITE ring was negotiated: the header, then released u32 (the ring bytes
     * the sender has freed in all, mod 2^32). Every other message keeps v1's format.
     */
    static final int RING_CREDIT_LENGTH = 8;
    /** Protocol v2's RING message: the header, then address u64, length u32, rkey u32. */
    static final int RING_MESSAGE_LENGTH = HEADER_LENGTH + 16;
    /**
     * Protocol v2's READ rendezvous: a buffer this side exposes to the peer, to READ and then answer with a DONE. The
     * header (credits as any header; the RNDV spends a credit as DATA does), then id u32 (the count of RNDVs sent
     * before it, mod 2^32), length u32 (1 .. 2^31 - 1), address u64, rkey u32 and flags u32 (none defined: 0).
     */
    static final int TYPE_RNDV = 5;
    static final int RNDV_MESSAGE_LENGTH = HEADER_LENGTH + 24;
    /**
     * Protocol v2's READ rendezvous: the RNDV of this id was read, its window may go. The header with credits 0 (a DONE
     * takes none of the peer's credits and grants none), then id u32; sent as SEND_WITH_INV of the RNDV's rkey.
     */
    static final int TYPE_DONE = 6;
    static final int DONE_MESSAGE_LENGTH = HEADER_LENGTH + 4;
    /** The largest rendezvous: an RNDV's length is at most this, so that it fits a Java array and a ByteBuf. */
    static final int MAX_RENDEZVOUS_LENGTH = Integer.MAX_VALUE;
    static final int MAX_CREDITS_PER_HEADER = 0xffff;

    /** The most credits one CREDIT message returns (pooled credits): its second byte. */
    static final int MAX_RETURNED_PER_HEADER = 0xff;

    /** Writes the header of a SEND at {@code at}: {@code type}, reserved 0, {@code credits} (0..0xffff). */
    static void putHeader(ByteBuffer buf, int at, int type, int credits) {
        putHeader(buf, at, type, 0, credits);
    }

    /** As {@link #putHeader(ByteBuffer, int, int, int)}, the second byte {@code returned} (pooled credits' CREDIT). */
    static void putHeader(ByteBuffer buf, int at, int type, int returned, int credits) {
        buf.put(at, (byte) type);
        buf.put(at + 1, (byte) returned);
        buf.putShort(at + 2, (short) credits);
    }

    /** The credits a CREDIT message returns unspent (pooled credits; 0 in every other message). */
    static int headerReturned(ByteBuf message) {
        return message.getUnsignedByte(1);
    }

    /** The released count of a v2 CREDIT message ({@link #RING_CREDIT_LENGTH} bytes). */
    static int creditReleased(ByteBuf message) {
        return message.getInt(HEADER_LENGTH);
    }

    /** Writes an RNDV message at {@code at} ({@link #RNDV_MESSAGE_LENGTH} bytes). */
    static void putRendezvous(ByteBuffer buf, int at, int credits, int id, int length, long address, int rkey) {
        putHeader(buf, at, TYPE_RNDV, credits);
        buf.putInt(at + HEADER_LENGTH, id);
        buf.putInt(at + HEADER_LENGTH + 4, length);
        buf.putLong(at + HEADER_LENGTH + 8, address);
        buf.putInt(at + HEADER_LENGTH + 16, rkey);
        buf.putInt(at + HEADER_LENGTH + 20, 0);
    }

    /** Writes a DONE message at {@code at} ({@link #DONE_MESSAGE_LENGTH} bytes). */
    static void putDone(ByteBuffer buf, int at, int id) {
        putHeader(buf, at, TYPE_DONE, 0);
        buf.putInt(at + HEADER_LENGTH, id);
    }

    /** The id of an RNDV or DONE message. */
    static int rendezvousId(ByteBuf message) {
        return message.getInt(HEADER_LENGTH);
    }

    /** The length an RNDV message announces (checked by {@link #checkHeader}: 1 .. 2^31 - 1). */
    static int rendezvousLength(ByteBuf message) {
        return message.getInt(HEADER_LENGTH + 4);
    }

    /** The address an RNDV message announces: the peer's, unchecked (a wrong one fails the READ). */
    static long rendezvousAddress(ByteBuf message) {
        return message.getLong(HEADER_LENGTH + 8);
    }

    /** The rkey an RNDV message announces: the peer's, unchecked (a wrong one fails the READ). */
    static int rendezvousRkey(ByteBuf message) {
        return message.getInt(HEADER_LENGTH + 16);
    }

    /** The message type of the header that starts {@code message}. */
    static int headerType(ByteBuf message) {
        return message.getUnsignedByte(0);
    }

    /** The credits the header that starts {@code message} grants. */
    static int headerCredits(ByteBuf message) {
        return message.getUnsignedShort(2);
    }

    /**
     * What is wrong with a received message of {@code byteLen} bytes that starts with its header, as the peer did it
     * ("sent ..."), or {@code null} if it is well-formed: a known type, reserved 0, DATA with payload, CREDIT and FIN
     * without; and with the paths of {@code paths} (the flags both sides set: {@link #FLAG_WRITE_RING},
     * {@link #FLAG_POOLED_CREDITS}, {@link #FLAG_READ_RENDEZVOUS}) their messages: with the WRITE ring a RING message
     * and a CREDIT message with its released count, with pooled credits a CREDIT message whose second byte returns
     * credits, with the READ rendezvous RNDV and DONE messages (their lengths, an RNDV's announced length and flags, a
     * DONE's zero credits; ids are the rendezvous tables' to check).
     */
    static String checkHeader(ByteBuf message, int byteLen, int paths) {
        if (byteLen < HEADER_LENGTH) {
            return "sent a message of " + byteLen + " bytes, shorter than the " + HEADER_LENGTH + "-byte header";
        }
        int type = headerType(message);
        boolean ring = (paths & FLAG_WRITE_RING) != 0;
        boolean rendezvous = (paths & FLAG_READ_RENDEZVOUS) != 0;
        if (type == TYPE_RING ? !ring : type == TYPE_RNDV || type == TYPE_DONE ? !rendezvous
                : type != TYPE_DATA && type != TYPE_CREDIT && type != TYPE_FIN) {
            return "sent a message of unknown type " + type + (type == TYPE_RING ? " (a RING message, but the WRITE "
                    + "ring was not negotiated)" : type == TYPE_RNDV || type == TYPE_DONE ? " (a rendezvous message, "
                    + "but the READ rendezvous was not negotiated)" : "");
        }
        int reserved = (paths & FLAG_POOLED_CREDITS) != 0 && type == TYPE_CREDIT ? 0 : message.getUnsignedByte(1);
        if (reserved != 0) {
            return "sent a header whose reserved byte is " + reserved + ", not 0";
        }
        switch (type) {
            case TYPE_RING:
                return byteLen == RING_MESSAGE_LENGTH ? null
                        : "sent a RING message of " + byteLen + " bytes, not " + RING_MESSAGE_LENGTH;
            case TYPE_RNDV:
            case TYPE_DONE:
                return checkRendezvous(message, byteLen, type);
            case TYPE_DATA:
                return byteLen > HEADER_LENGTH ? null : "sent a DATA message without payload";
            default:
                if (byteLen == HEADER_LENGTH || ring && type == TYPE_CREDIT && byteLen == RING_CREDIT_LENGTH) {
                    return null;
                }
                return "sent a " + (type == TYPE_FIN ? "FIN" : "CREDIT") + " message with " + (byteLen - HEADER_LENGTH)
                        + " bytes of payload";
        }
    }

    private static String checkRendezvous(ByteBuf message, int byteLen, int type) {
        if (type == TYPE_DONE) {
            if (byteLen != DONE_MESSAGE_LENGTH) {
                return "sent a DONE message of " + byteLen + " bytes, not " + DONE_MESSAGE_LENGTH;
            }
            int credits = headerCredits(message);
            return credits == 0 ? null : "sent a DONE message granting " + credits + " credits (a DONE grants none)";
        }
        if (byteLen != RNDV_MESSAGE_LENGTH) {
            return "sent an RNDV message of " + byteLen + " bytes, not " + RNDV_MESSAGE_LENGTH;
        }
        int length = rendezvousLength(message);
        if (length <= 0) { // 0, or 2^31 and more read as a signed int
            return "sent an RNDV message announcing " + Integer.toUnsignedString(length) + " bytes (1 to "
                    + MAX_RENDEZVOUS_LENGTH + " are allowed)";
        }
        int flags = message.getInt(HEADER_LENGTH + 20);
        return flags == 0 ? null : "sent an RNDV message with unknown flags 0x" + Integer.toHexString(flags);
    }

    private RdmaProtocol() {
    }

    static byte[] handshake(int receiveBufferSize, int receiveBufferCount) {
        return handshake(receiveBufferSize, receiveBufferCount, 0);
    }

    /** A handshake offering the paths of {@code flags} ({@link #FLAG_WRITE_RING}; not {@link #FLAG_POOLED_CREDITS}). */
    static byte[] handshake(int receiveBufferSize, int receiveBufferCount, int flags) {
        if ((flags & FLAG_POOLED_CREDITS) != 0) {
            throw new IllegalArgumentException("pooled credits need their extension: handshake(size, count, flags, "
                    + "initial, limit)");
        }
        return ByteBuffer.allocate(HANDSHAKE_LENGTH).putInt(MAGIC).putShort((short) VERSION).putShort((short) flags)
                .putInt(receiveBufferSize).putInt(receiveBufferCount).array();
    }

    /**
     * A handshake offering pooled credits ({@link #FLAG_POOLED_CREDITS} added to {@code flags}): a v1 peer reads
     * {@code receiveBufferCount}, a pooled one {@code initialCredits} and {@code creditLimit}.
     */
    static byte[] handshake(int receiveBufferSize, int receiveBufferCount, int flags, int initialCredits,
            int creditLimit) {
        return ByteBuffer.allocate(POOLED_HANDSHAKE_LENGTH).putInt(MAGIC).putShort((short) VERSION)
                .putShort((short) (flags | FLAG_POOLED_CREDITS)).putInt(receiveBufferSize).putInt(receiveBufferCount)
                .putInt(initialCredits).putInt(creditLimit).array();
    }

    /**
     * {@code handshake} (one of {@link #handshake}'s) with the probe target added: {@link #FLAG_PROBE_TARGET}, and
     * {@code address} and {@code rkey} at {@link #PROBE_TARGET_OFFSET}.
     */
    static byte[] withProbeTarget(byte[] handshake, long address, int rkey) {
        ByteBuffer b = ByteBuffer.wrap(Arrays.copyOf(handshake, PROBE_HANDSHAKE_LENGTH));
        b.putShort(6, (short) (b.getShort(6) | FLAG_PROBE_TARGET));
        b.putLong(PROBE_TARGET_OFFSET, address).putInt(PROBE_TARGET_OFFSET + 8, rkey);
        return b.array();
    }

    /** A peer's handshake: what it can receive. */
    static final class Handshake {
        final int version;
        final int receiveBufferSize;
        final int receiveBufferCount;
        /** The capability bits the peer set, all of them (a side uses only those it knows). */
        final int flags;
        /** With {@link #FLAG_POOLED_CREDITS}: the extension's initial credits and credit limit (checked). */
        private final int initialCredits;
        private final int creditLimit;
        /** With {@link #FLAG_PROBE_TARGET}: where this side's probes READ (the peer's keys: any value hurts only it). */
        final long probeAddress;
        final int probeRkey;

        private Handshake(int version, int flags, int receiveBufferSize, int receiveBufferCount, int initialCredits,
                int creditLimit, long probeAddress, int probeRkey) {
            this.version = version;
            this.flags = flags;
            this.receiveBufferSize = receiveBufferSize;
            this.receiveBufferCount = receiveBufferCount;
            this.initialCredits = initialCredits;
            this.creditLimit = creditLimit;
            this.probeAddress = probeAddress;
            this.probeRkey = probeRkey;
        }

        /** Whether the peer exposes a probe target ({@link #probeAddress}, {@link #probeRkey}). */
        boolean offersProbeTarget() {
            return (flags & FLAG_PROBE_TARGET) != 0;
        }

        /** Whether the peer offers pooled credits (its extension was checked by {@link #parse}). */
        boolean offersPooledCredits() {
            return (flags & FLAG_POOLED_CREDITS) != 0;
        }

        /** Whether the peer (the accepted side) keeps this side going: {@link #FLAG_KEEPS_PEER_GOING}. */
        boolean keepsPeerGoing() {
            return (flags & FLAG_KEEPS_PEER_GOING) != 0;
        }

        /** Whether pooled credits are used: this side offers them ({@code offered}) and the peer too. */
        boolean pooledCredits(boolean offered) {
            return offered && offersPooledCredits();
        }

        /** The credits the peer starts this side with: the extension's, or v1's receive count. */
        int initialCredits(boolean pooled) {
            return pooled ? initialCredits : receiveBufferCount;
        }

        /** The most credits the peer may grant this side: the extension's limit, or v1's receive count. */
        int creditLimit(boolean pooled) {
            return pooled ? creditLimit : receiveBufferCount;
        }

        /** Whether every message of the peer asks for a solicited event: {@link #FLAG_SOLICITS}. */
        boolean solicits() {
            return (flags & FLAG_SOLICITS) != 0;
        }

        /** Whether the peer can take part in READ rendezvous ({@link #FLAG_READ_RENDEZVOUS}). */
        boolean offersReadRendezvous() {
            return (flags & FLAG_READ_RENDEZVOUS) != 0;
        }

        /** Whether the peer can receive by a WRITE ring. */
        boolean offersWriteRing() {
            return (flags & FLAG_WRITE_RING) != 0;
        }

        /**
         * Parses private data, or explains in the returned exception's message why it isn't ours; the reject reason
         * to send back is {@link #rejectReason(byte[], int)}.
         */
        static Handshake parse(byte[] data, int length) throws RdmaProtocolException {
            if (length < HANDSHAKE_LENGTH) {
                throw new RdmaProtocolException(REJECT_BAD_MAGIC,
                        "handshake of " + length + " bytes, expected " + HANDSHAKE_LENGTH);
            }
            ByteBuffer b = ByteBuffer.wrap(data, 0, length);
            int magic = b.getInt();
            int version = b.getShort() & 0xffff;
            int flags = b.getShort() & 0xffff;
            int size = b.getInt();
            int count = b.getInt();
            if (magic != MAGIC) {
                throw new RdmaProtocolException(REJECT_BAD_MAGIC, String.format(
                        "not a netty-rdma peer (magic 0x%08x, expected 0x%08x)", magic, MAGIC));
            }
            if (version != VERSION) {
                throw new RdmaProtocolException(REJECT_VERSION,
                        "protocol version " + version + " not supported (this side speaks " + VERSION + ')');
            }
            if (size <= HEADER_LENGTH || count < 4 || count > MAX_CREDITS_PER_HEADER) {
                // (larger values than this side's are fine: it sends no larger messages and holds no more memory)
                throw new RdmaProtocolException(REJECT_INVALID,
                        "invalid receive parameters: " + Integer.toUnsignedString(count) + " buffers of "
                        + Integer.toUnsignedString(size) + " bytes");
            }
            int initial = 0;
            int limit = 0;
            if ((flags & FLAG_POOLED_CREDITS) != 0) {
                // a known bit: its extension is checked whether or not this side offers pooled credits
                if (length < POOLED_HANDSHAKE_LENGTH) {
                    throw new RdmaProtocolException(REJECT_INVALID, "the pooled-credits flag is set but the handshake "
                            + "has " + length + " bytes, not the " + POOLED_HANDSHAKE_LENGTH
                            + " with initial credits and credit limit");
                }
                initial = b.getInt();
                limit = b.getInt();
                if (initial < CreditWindow.FLOOR || limit < initial || limit > MAX_CREDITS_PER_HEADER) {
                    // compared as signed: a value of 2^31 or more is negative, below the floor or the initial
                    throw new RdmaProtocolException(REJECT_INVALID, "invalid pooled credits: initial "
                            + Integer.toUnsignedString(initial) + ", limit " + Integer.toUnsignedString(limit)
                            + " (need " + CreditWindow.FLOOR + " <= initial <= limit <= " + MAX_CREDITS_PER_HEADER
                            + ')');
                }
            }
            long probeAddress = 0;
            int probeRkey = 0;
            if ((flags & FLAG_PROBE_TARGET) != 0) {
                if (length < PROBE_HANDSHAKE_LENGTH) {
                    throw new RdmaProtocolException(REJECT_INVALID, "the probe-target flag is set but the handshake "
                            + "has " + length + " bytes, not the " + PROBE_HANDSHAKE_LENGTH + " with its address and key");
                }
                probeAddress = b.getLong(PROBE_TARGET_OFFSET);
                probeRkey = b.getInt(PROBE_TARGET_OFFSET + 8);
            }
            return new Handshake(version, flags, size, count, initial, limit, probeAddress, probeRkey);
        }
    }

    static byte[] reject(int reason, String message) {
        byte[] text = message.getBytes(StandardCharsets.UTF_8);
        int n = Math.min(text.length, MAX_REJECT_LENGTH - 8);
        ByteBuffer b = ByteBuffer.allocate(8 + n).putInt(MAGIC).putShort((short) VERSION).putShort((short) reason);
        b.put(text, 0, n);
        return b.array();
    }

    /** The message of a netty-rdma reject, or null if the private data isn't one (nobody listening, another app). */
    static String rejectMessage(byte[] data, int length) {
        if (length < 8 || ByteBuffer.wrap(data).getInt() != MAGIC) {
            return null;
        }
        int end = length;
        while (end > 8 && data[end - 1] == 0) {
            end--; // IB/RoCE pad private data with zeros
        }
        return new String(Arrays.copyOfRange(data, 8, end), StandardCharsets.UTF_8);
    }

    /** A peer that doesn't speak our protocol; carries the reject reason to send. */
    static final class RdmaProtocolException extends Exception {
        private static final long serialVersionUID = 1L;
        final int reason;

        RdmaProtocolException(int reason, String message) {
            super(message);
            this.reason = reason;
        }
    }
}
