package org.nettyrdma.verbs;

/** The Linux errno values the SPI uses, with their names; data-path calls return them negated. */
public final class Errno {
    public static final int EPERM = 1;
    public static final int ENOENT = 2;
    public static final int EIO = 5;
    public static final int EBADF = 9;
    public static final int EAGAIN = 11;
    public static final int ENOMEM = 12;
    public static final int EACCES = 13;
    public static final int EFAULT = 14;
    public static final int EBUSY = 16;
    public static final int EEXIST = 17;
    public static final int ENODEV = 19;
    public static final int EINVAL = 22;
    public static final int ENOSPC = 28;
    public static final int ENOSYS = 38;
    public static final int EOVERFLOW = 75;
    public static final int EOPNOTSUPP = 95;
    public static final int EADDRINUSE = 98;
    public static final int EADDRNOTAVAIL = 99;
    public static final int ENETUNREACH = 101;
    public static final int ECONNABORTED = 103;
    public static final int ECONNRESET = 104;
    public static final int EISCONN = 106;
    public static final int ENOTCONN = 107;
    public static final int ETIMEDOUT = 110;
    public static final int ECONNREFUSED = 111;
    public static final int EHOSTUNREACH = 113;

    private Errno() {
    }

    /** "ENOMEM (Cannot allocate memory)"-style text for a positive or negative errno. */
    public static String describe(int errno) {
        int e = Math.abs(errno);
        switch (e) {
            case EPERM: return "EPERM (Operation not permitted)";
            case ENOENT: return "ENOENT (No such file or directory)";
            case EIO: return "EIO (Input/output error)";
            case EBADF: return "EBADF (Bad file descriptor: the resource is closed)";
            case EAGAIN: return "EAGAIN (Resource temporarily unavailable)";
            case ENOMEM: return "ENOMEM (Cannot allocate memory)";
            case EACCES: return "EACCES (Permission denied)";
            case EFAULT: return "EFAULT (Bad address)";
            case EBUSY: return "EBUSY (Device or resource busy)";
            case EEXIST: return "EEXIST (File exists)";
            case ENODEV: return "ENODEV (No such device)";
            case EINVAL: return "EINVAL (Invalid argument)";
            case ENOSPC: return "ENOSPC (No space left on device)";
            case ENOSYS: return "ENOSYS (Function not implemented)";
            case EOVERFLOW: return "EOVERFLOW (Value too large for defined data type)";
            case EOPNOTSUPP: return "EOPNOTSUPP (Operation not supported)";
            case EADDRINUSE: return "EADDRINUSE (Address already in use)";
            case EADDRNOTAVAIL: return "EADDRNOTAVAIL (Cannot assign requested address)";
            case ENETUNREACH: return "ENETUNREACH (Network is unreachable)";
            case ECONNABORTED: return "ECONNABORTED (Software caused connection abort)";
            case ECONNRESET: return "ECONNRESET (Connection reset by peer)";
            case EISCONN: return "EISCONN (Transport endpoint is already connected)";
            case ENOTCONN: return "ENOTCONN (Transport endpoint is not connected)";
            case ETIMEDOUT: return "ETIMEDOUT (Connection timed out)";
            case ECONNREFUSED: return "ECONNREFUSED (Connection refused)";
            case EHOSTUNREACH: return "EHOSTUNREACH (No route to host)";
            default: return "errno " + e;
        }
    }
}
