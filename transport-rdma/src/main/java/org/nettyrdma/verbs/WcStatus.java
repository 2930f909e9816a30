package org.nettyrdma.verbs;

/** Work completion status codes; the values are those of {@code enum ibv_wc_status}. */
public final class WcStatus {
    public static final int SUCCESS = 0;
    public static final int LOC_LEN_ERR = 1;
    public static final int LOC_QP_OP_ERR = 2;
    public static final int LOC_PROT_ERR = 4;
    public static final int WR_FLUSH_ERR = 5;
    /** A BIND_MW the device refused (window not free, region without MW_BIND, range outside it, another PD). */
    public static final int MW_BIND_ERR = 6;
    public static final int BAD_RESP_ERR = 7;
    public static final int LOC_ACCESS_ERR = 8;
    public static final int REM_INV_REQ_ERR = 9;
    public static final int REM_ACCESS_ERR = 10;
    public static final int REM_OP_ERR = 11;
    public static final int RETRY_EXC_ERR = 12;
    public static final int RNR_RETRY_EXC_ERR = 13;
    public static final int REM_ABORT_ERR = 16;
    public static final int FATAL_ERR = 19;
    public static final int RESP_TIMEOUT_ERR = 20;
    public static final int GENERAL_ERR = 21;

    private WcStatus() {
    }

    /** The status' name as {@code ibv_wc_status_str} would print it, for messages. */
    public static String name(int status) {
        switch (status) {
            case SUCCESS: return "success";
            case LOC_LEN_ERR: return "local length error";
            case LOC_QP_OP_ERR: return "local QP operation error";
            case LOC_PROT_ERR: return "local protection error";
            case WR_FLUSH_ERR: return "Work Request Flushed Error";
            case MW_BIND_ERR: return "memory bind operation error";
            case BAD_RESP_ERR: return "bad response error";
            case LOC_ACCESS_ERR: return "local access error";
            case REM_INV_REQ_ERR: return "remote invalid request error";
            case REM_ACCESS_ERR: return "remote access error";
            case REM_OP_ERR: return "remote operation error";
            case RETRY_EXC_ERR: return "transport retry counter exceeded";
            case RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
            case REM_ABORT_ERR: return "remote aborted error";
            case FATAL_ERR: return "fatal error";
            case RESP_TIMEOUT_ERR: return "response timeout error";
            case GENERAL_ERR: return "general error";
            default: return "status " + status;
        }
    }
}
