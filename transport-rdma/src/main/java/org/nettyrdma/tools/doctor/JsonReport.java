package org.nettyrdma.tools.doctor;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The report as JSON ({@code --json}), for scripts and probes: the same facts and findings as the text. */
final class JsonReport {
    private JsonReport() {
    }

    static String render(Report r) {
        Facts f = r.facts();
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("ok", r.problems() == 0);
        root.put("problems", r.problems());
        root.put("warnings", r.warnings());
        root.put("provider", f.provider());
        root.put("nativeAvailable", f.verdict().available());
        root.put("nativeUnavailableReason", f.verdict().reason());
        root.put("nativeUnavailableMessage", f.verdict().message());
        List<Object> devices = new ArrayList<>();
        for (Device d : f.devices()) {
            Map<String, Object> dev = new LinkedHashMap<>();
            dev.put("name", d.name());
            dev.put("transport", d.transport());
            dev.put("description", d.description());
            dev.put("uverbs", d.uverbsNode());
            List<Object> ports = new ArrayList<>();
            for (Port p : d.ports()) {
                Map<String, Object> port = new LinkedHashMap<>();
                port.put("port", p.number());
                port.put("state", p.state());
                port.put("physState", p.physState());
                port.put("linkLayer", p.linkLayer());
                port.put("netdev", p.netdev());
                port.put("addresses", p.netdev() == null ? List.of() : f.netdevs().addresses(p.netdev()));
                List<Object> gids = new ArrayList<>();
                for (Gid g : p.gids()) {
                    Map<String, Object> gid = new LinkedHashMap<>();
                    gid.put("index", g.index());
                    gid.put("gid", g.gid());
                    gid.put("type", g.type());
                    gid.put("roceVersion", g.roceVersion());
                    gid.put("netdev", g.netdev());
                    gid.put("ip", g.ip());
                    gids.add(gid);
                }
                port.put("gids", gids);
                ports.add(port);
            }
            dev.put("ports", ports);
            devices.add(dev);
        }
        root.put("devices", devices);
        Map<String, Object> nodes = new LinkedHashMap<>();
        nodes.put("present", f.verdict().devInfiniband());
        nodes.put("nodes", f.verdict().devNodes());
        nodes.put("inaccessible", f.verdict().inaccessibleNode());
        root.put("devInfiniband", nodes);
        Map<String, Object> memlock = new LinkedHashMap<>();
        memlock.put("softBytes", f.memlock() == null ? null : limit(f.memlock().soft()));
        memlock.put("hardBytes", f.memlock() == null ? null : limit(f.memlock().hard()));
        memlock.put("capIpcLock", f.capIpcLock());
        memlock.put("minimumBytes", f.verdict().minMemlockBytes());
        if (f.need() != null) {
            MemlockNeed n = f.need();
            memlock.put("neededBytes", n.totalBytes());
            memlock.put("connections", n.connections());
            memlock.put("eventLoops", n.eventLoops());
            memlock.put("perConnectionBytes", n.perConnectionBytes());
            memlock.put("stagingBytes", n.stagingBytes());
            memlock.put("lentBytes", n.lentBytes());
            memlock.put("poolRegionBytes", n.poolRoundingBytes());
        } else {
            memlock.put("neededError", f.needError());
        }
        root.put("memlock", memlock);
        root.put("address", f.address());
        List<Object> checks = new ArrayList<>();
        for (Finding x : r.findings()) {
            Map<String, Object> c = new LinkedHashMap<>();
            c.put("check", x.check());
            c.put("status", x.status().name());
            c.put("message", x.message());
            c.put("fix", x.fix());
            checks.add(c);
        }
        root.put("checks", checks);
        return Json.write(root);
    }

    /** Bytes, or -1 for unlimited. */
    private static long limit(long bytes) {
        return bytes == Long.MAX_VALUE ? -1 : bytes;
    }
}
