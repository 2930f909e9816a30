package org.nettyrdma.tools.doctor;

import java.util.ArrayList;
import java.util.List;

/** The facts and the findings of one run of the doctor. */
record Report(Facts facts, List<Finding> findings) {

    static Report of(Facts facts) {
        List<Finding> findings = new ArrayList<>();
        findings.add(ProviderCheck.check(facts));
        findings.addAll(DeviceChecks.check(facts));
        findings.addAll(DeviceNodeChecks.check(facts));
        findings.addAll(MemlockChecks.check(facts));
        return new Report(facts, List.copyOf(findings));
    }

    long problems() {
        return findings.stream().filter(f -> f.status() == Finding.Status.PROBLEM).count();
    }

    long warnings() {
        return findings.stream().filter(f -> f.status() == Finding.Status.WARNING).count();
    }

    /** 0 without problems, 1 with. */
    int exitCode() {
        return problems() == 0 ? 0 : 1;
    }
}
