// A tiny Java program for vm/smoke: shows that the host's JDK runs in the guest, sees the RDMA devices'
// environment, and how fast JIT-compiled code runs under TCG (compare with the same run on the host).
public final class Smoke {
    public static void main(String[] args) {
        long t0 = System.nanoTime();
        long sum = 0;
        for (int round = 0; round < 20; round++) {
            for (int i = 0; i < 5_000_000; i++) {
                sum += i ^ round;
            }
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("java %s on %d cpus, max heap %d MB: 100M-iteration loop in %d ms (%d); "
                + "RXE_IP=%s SIW_IP=%s%n", System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(),
                Runtime.getRuntime().maxMemory() >> 20, ms, sum, System.getenv("RXE_IP"), System.getenv("SIW_IP"));
    }
}
