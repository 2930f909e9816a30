package org.apache.spark.network.sasl;

import io.netty.channel.Channel;

import javax.security.sasl.SaslException;
import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * Test access to Spark's own SASL encryption handlers ({@code SaslEncryption}, package-private): installs them on a
 * channel as Spark's SASL bootstraps do after a handshake that agreed on auth-conf, with a stand-in for the SASL
 * mechanism that, like DIGEST-MD5, numbers each wrapped block (so blocks must be unwrapped in the order they were
 * wrapped) and adds a check value, but needs no handshake. Lives in Spark's package only to reach
 * {@code SaslEncryption.addToChannel}; Spark's code is used as it is.
 */
public final class SaslEncryptionChannels {
    private SaslEncryptionChannels() {
    }

    /** Spark's encryption and decryption handlers on {@code channel}, blocks of at most {@code maxBlock} bytes. */
    public static void install(Channel channel, int maxBlock) {
        SaslEncryption.addToChannel(channel, new SequencedBackend(), maxBlock);
    }

    /** wrap: [sequence number, 4 bytes][data][CRC32C of both, 4 bytes]; unwrap checks both. */
    private static final class SequencedBackend implements SaslEncryptionBackend {
        private int wrapped;
        private int unwrapped;

        @Override
        public void dispose() {
        }

        @Override
        public byte[] wrap(byte[] data, int offset, int len) {
            ByteBuffer out = ByteBuffer.allocate(len + 8);
            out.putInt(wrapped++).put(data, offset, len);
            CRC32C crc = new CRC32C();
            crc.update(out.array(), 0, len + 4);
            return out.putInt((int) crc.getValue()).array();
        }

        @Override
        public byte[] unwrap(byte[] data, int offset, int len) throws SaslException {
            ByteBuffer in = ByteBuffer.wrap(data, offset, len);
            int sequence = in.getInt();
            CRC32C crc = new CRC32C();
            crc.update(data, offset, len - 4);
            if (in.getInt(offset + len - 4) != (int) crc.getValue()) {
                throw new SaslException("block " + unwrapped + ": check value mismatch (" + len + " bytes)");
            }
            if (sequence != unwrapped) {
                throw new SaslException("block " + sequence + " arrived where block " + unwrapped + " was due");
            }
            unwrapped++;
            byte[] plain = new byte[len - 8];
            System.arraycopy(data, offset + 4, plain, 0, plain.length);
            return plain;
        }
    }
}
