package org.nettyrdma.tools.doctor;

/**
 * The outcome of one check: what was found and, for a warning or a problem, what to do about it.
 *
 * @param check   what was checked ("devices", "memlock", ...)
 * @param status  OK, WARNING (works, but watch it) or PROBLEM (RDMA will not work, or not for long)
 * @param message what was found
 * @param fix     what to do; null when there is nothing to do
 */
record Finding(String check, Status status, String message, String fix) {
    enum Status { OK, WARNING, PROBLEM }

    static Finding ok(String check, String message) {
        return new Finding(check, Status.OK, message, null);
    }

    static Finding warning(String check, String message, String fix) {
        return new Finding(check, Status.WARNING, message, fix);
    }

    static Finding problem(String check, String message, String fix) {
        return new Finding(check, Status.PROBLEM, message, fix);
    }
}
