package org.nettyrdma.tools.doctor;

import java.net.InetAddress;
import java.net.UnknownHostException;

/** IP addresses as text, one spelling each (no scope, IPv6 compressed as {@link InetAddress} writes it). */
final class Addresses {
    private Addresses() {
    }

    static String text(InetAddress a) {
        String s = a.getHostAddress();
        int scope = s.indexOf('%');
        return scope < 0 ? s : s.substring(0, scope);
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
