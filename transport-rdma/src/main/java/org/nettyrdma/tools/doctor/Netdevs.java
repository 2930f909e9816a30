package org.nettyrdma.tools.doctor;

import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

/** The IP addresses of network interfaces: this machine's ({@link #system()}), or given ones in tests. */
interface Netdevs {
    /** The addresses of {@code netdev} but link-local ones, IPv4 first; empty if there is no such interface. */
    List<String> addresses(String netdev);

    /** The interface that has {@code ip}, or null. */
    String netdevOf(String ip);

    static Netdevs system() {
        return new Netdevs() {
            @Override
            public List<String> addresses(String netdev) {
                List<String> result = new ArrayList<>();
                try {
                    NetworkInterface nif = NetworkInterface.getByName(netdev);
                    if (nif != null) {
                        List<InetAddress> all = Collections.list(nif.getInetAddresses());
                        // IPv4 first; link-local addresses are not what channels bind to
                        all.sort(Comparator.comparing(a -> a instanceof Inet6Address));
                        for (InetAddress a : all) {
                            if (!a.isLinkLocalAddress()) {
                                result.add(Addresses.text(a));
                            }
                        }
                    }
                } catch (SocketException e) {
                    // not readable: none
                }
                return result;
            }

            @Override
            public String netdevOf(String ip) {
                try {
                    NetworkInterface nif = NetworkInterface.getByInetAddress(InetAddress.getByName(ip));
                    return nif == null ? null : nif.getName();
                } catch (SocketException | UnknownHostException e) {
                    return null;
                }
            }
        };
    }

    /** Interfaces with these addresses (literal IPs), for tests. */
    static Netdevs of(Map<String, List<String>> addressesByNetdev) {
        return new Netdevs() {
            @Override
            public List<String> addresses(String netdev) {
                return addressesByNetdev.getOrDefault(netdev, List.of()).stream().map(Addresses::normalize).toList();
            }

            @Override
            public String netdevOf(String ip) {
                String wanted = Addresses.normalize(ip);
                for (Map.Entry<String, List<String>> e : addressesByNetdev.entrySet()) {
                    if (e.getValue().stream().map(Addresses::normalize).anyMatch(wanted::equals)) {
                        return e.getKey();
                    }
                }
                return null;
            }
        };
    }
}
