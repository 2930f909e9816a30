package org.nettyrdma.verbs;

/** An RDMA device (an {@code ibv_context}). Devices live as long as their provider. */
public interface Device {

    String name();

    DeviceAttributes attributes();

    /** {@code ibv_alloc_pd}. */
    ProtectionDomain allocPd() throws VerbsException;

    /** {@code ibv_create_comp_channel}: where armed completion queues report that they have new completions. */
    CompletionChannel createCompletionChannel() throws VerbsException;

    /**
     * {@code ibv_create_cq}.
     *
     * @param cqe     how many completions it holds; more than {@link DeviceAttributes#maxCqe()} fails with EINVAL
     * @param channel where {@link CompletionQueue#requestNotify(boolean)} reports, or {@code null}
     */
    CompletionQueue createCq(int cqe, CompletionChannel channel) throws VerbsException;
}
