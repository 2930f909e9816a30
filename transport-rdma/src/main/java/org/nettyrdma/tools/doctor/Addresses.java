package org.nettyrdma.tools.doctor;

import io.netty.util.NetUtil;

import java.net.InetAddress;
import java.net.UnknownHostException;

/** IP addresses as text, one spelling each (IPv6 compressed as RFC 5952 writes it, no scope). */
final class Addresses {
    private Addresses() {
    }

    static String text(InetAddress a) {
        return NetUtil.toAddressString(a); // RFC 5952: fd77::1, no scope
    }

    /** {@code ip} in the spelling of {@link #text}; as given if it is not an IP literal. */
    static String normalize(String ip) {
        if (ip == null || !(ip.contains(":") || ip.chars().allMatch(c -> c == '.' || Character.isDigit(c)))) {
            return ip;
        }
        try {
            return text(InetAddress.getByName(ip));
        } catch (UnknownHostException e) {
            return ip;
        }
    }
}
