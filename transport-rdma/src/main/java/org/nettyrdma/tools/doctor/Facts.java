package org.nettyrdma.tools.doctor;

import org.nettyrdma.verbs.jni.NativeDiagnosis;
import org.nettyrdma.verbs.jni.ProcSelf;

import java.util.List;

/**
 * Everything the doctor found out, before it judges: the provider the configuration selects, the JNI provider's own
 * probe and verdict, the devices in sysfs, the memlock limit and CAP_IPC_LOCK of this process, the registered memory
 * the configuration needs, and the address the application will use (null if not given).
 *
 * @param provider   {@code org.nettyrdma.provider}: native, emulated or auto
 * @param verdict    the JNI provider's facts and verdict
 * @param memlock    /proc/self/limits' "Max locked memory", null if unreadable
 * @param capIpcLock whether CapEff has CAP_IPC_LOCK
 * @param need       the estimate, or null if it could not be measured ({@code needError} says why)
 */
record Facts(String provider, NativeDiagnosis verdict, List<Device> devices, ProcSelf.Limit memlock,
             boolean capIpcLock, MemlockNeed need, String needError, String address, Netdevs netdevs) {

    /** The device whose port has {@code ip} (a RoCE GID, or the IP of the port's netdev), or null. */
    Device deviceFor(String ip) {
        String wanted = Addresses.normalize(ip);
        String netdev = netdevs.netdevOf(wanted);
        for (Device d : devices) {
            for (Port p : d.ports()) {
                if (p.gids().stream().anyMatch(g -> wanted.equals(g.ip()))
                        || netdev != null && netdev.equals(p.netdev())) {
                    return d;
                }
            }
        }
        return null;
    }

    /** The devices the application may use: the one of {@link #address()} if it has one, else all. */
    List<Device> devicesInUse() {
        Device d = address == null ? null : deviceFor(address);
        return d == null ? devices : List.of(d);
    }
}
