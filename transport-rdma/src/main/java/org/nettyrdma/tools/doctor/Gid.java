package org.nettyrdma.tools.doctor;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Locale;

/**
 * One GID table entry of a port: its index, the GID, its type as the kernel names it ("RoCE v2", "IB/RoCE v1"), the
 * netdev it belongs to (RoCE; null where the kernel names none), and the IP address a RoCE GID encodes (IPv4-mapped
 * or IPv6; null for link-local, MAC-based or InfiniBand GIDs).
 */
record Gid(int index, String gid, String type, String netdev, String ip) {

    /** The entry, with the IP derived from the GID where it encodes one. */
    static Gid of(int index, String gid, String type, String netdev) {
        return new Gid(index, gid, type, netdev, ipOf(gid));
    }

    /** Whether the GID is all zeros (an unused slot of the table). */
    static boolean isEmpty(String gid) {
        return gid == null || gid.chars().allMatch(c -> c == '0' || c == ':');
    }

    boolean isRoceV2() {
        return type != null && type.toLowerCase(Locale.ROOT).contains("v2");
    }

    /** The RoCE version its type names: "v2", "v1" (also "IB/RoCE v1"), or null. */
    String roceVersion() {
        if (type == null) {
            return null;
        }
        String t = type.toLowerCase(Locale.ROOT);
        return t.contains("v2") ? "v2" : t.contains("v1") ? "v1" : null;
    }

    private static String ipOf(String gid) {
        byte[] raw = bytes(gid);
        if (raw == null) {
            return null;
        }
        boolean mapped = true;
        for (int i = 0; i < 10; i++) {
            mapped &= raw[i] == 0;
        }
        mapped &= raw[10] == (byte) 0xff && raw[11] == (byte) 0xff;
        try {
            if (mapped) {
                return Addresses.text(InetAddress.getByAddress(new byte[] {raw[12], raw[13], raw[14], raw[15]}));
            }
            InetAddress a = InetAddress.getByAddress(raw);
            // fe80::/10 is derived from the MAC, not an address a channel binds; iWARP and IB GIDs are not IPs
            if (a.isLinkLocalAddress() || (raw[0] & 0xfe) != 0xfc && (raw[0] & 0xe0) != 0x20) {
                return null;
            }
            return Addresses.text(a);
        } catch (UnknownHostException e) {
            return null;
        }
    }

    /** The 16 bytes of a GID written as eight groups of four hex digits, or null. */
    static byte[] bytes(String gid) {
        if (gid == null) {
            return null;
        }
        String hex = gid.replace(":", "");
        if (hex.length() != 32) {
            return null;
        }
        byte[] raw = new byte[16];
        try {
            for (int i = 0; i < 16; i++) {
                raw[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            }
        } catch (NumberFormatException e) {
            return null;
        }
        return raw;
    }
}
