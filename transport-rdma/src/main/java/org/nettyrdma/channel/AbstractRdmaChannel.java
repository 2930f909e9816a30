package org.nettyrdma.channel;

import io.netty.channel.AbstractChannel;
import io.netty.channel.Channel;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.VerbsException;

import java.net.InetSocketAddress;
import java.net.SocketAddress;

/**
 * What the RDMA channels share: an RDMA CM id, and the registration with their event loop's {@link RdmaIoHandler}
 * that delivers its CM events and completions to the channel's unsafe (an {@link RdmaIoHandle}). The registration
 * lives until the channel's last completion, not until its deregistration.
 */
abstract class AbstractRdmaChannel extends AbstractChannel {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(AbstractRdmaChannel.class);

    volatile InetSocketAddress local;
    // event loop only
    RdmaIoHandler handler;
    RdmaIoHandler.Registration registration;
    private IoRegistration ioRegistration;
    /** The loop the channel was first registered on, where its queue pair and CM id stay. */
    private volatile EventLoop registeredLoop;
    CmId id;

    AbstractRdmaChannel(Channel parent, CmId id) {
        super(parent);
        this.id = id;
        if (id != null) {
            local = id.localAddress();
        }
    }

    /**
     * An RDMA event loop; once registered, only the loop of the first registration: the channel's queue pair and CM id
     * live on that loop's completion queue and event channel, which go on delivering its completions. Netty checks this
     * before it moves the channel, so a registration on another loop fails and leaves the channel as it was
     * (deregistered, its connection intact, on its loop); Netty's message only says "incompatible event loop", so the
     * reason is logged.
     */
    @Override
    protected boolean isCompatible(EventLoop loop) {
        if (!(loop instanceof IoEventLoop) || !((IoEventLoop) loop).isCompatible(ioHandleClass())) {
            return false;
        }
        EventLoop first = registeredLoop;
        if (first != null && loop != first) {
            logger.warn("{}: an RDMA channel cannot move to another event loop ({}): its queue pair and CM id live on "
                    + "the completion queue and event channel of {}, where it was first registered; register it again "
                    + "on that loop", this, loop, first);
            return false;
        }
        return true;
    }

    /** The class of this channel's unsafe, which the handler drives. */
    abstract Class<? extends RdmaIoHandle> ioHandleClass();

    @Override
    protected final void doRegister(ChannelPromise promise) {
        if (registration != null) {
            // registered again after deregister(), on its loop (isCompatible refuses any other): the registration
            // with the loop's handler lived on (doDeregister)
            promise.setSuccess();
            eventLoop().execute(this::registeredAgain); // after Netty's channelRegistered
            return;
        }
        registeredLoop = eventLoop();
        RdmaIoHandler.register(eventLoop(), (RdmaIoHandle) unsafe(), promise, (io, r) -> {
            ioRegistration = io;
            registration = r;
            handler = r.handler();
            if (id == null) {
                id = handler.resources().provider().createId(handler.cmChannel(), unsafe());
            } else {
                // an accepted id: its events came to the listener's loop until now
                id.migrate(handler.cmChannel());
                id.context(unsafe());
            }
            onRegistered();
        });
    }

    /** Registered with the loop's handler, the CM id on its event channel (event loop). */
    void onRegistered() {
    }

    boolean isRdmaRegistered() {
        return registration != null;
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    /** Registered again after {@code deregister()}, on its loop: what waited for the pipeline may go on. */
    void registeredAgain() {
    }

    @Override
    protected void doDeregister() {
        // the registration lives until the channel's last completion (releaseIdAndRegistration): completions still
        // come to this loop; reads (data, a FIN, new connections) wait until the channel is registered again on it,
        // a reset or a keep-alive failure still closes it
    }

    /**
     * Destroys the CM id and ends the registration (through the loop's wrapper, which counts registrations): from here
     * no event or completion can name this channel.
     */
    final void releaseIdAndRegistration() {
        destroyId();
        if (registration != null) {
            ioRegistration.cancel();
        }
    }

    /**
     * Starts over on a fresh CM id (event loop; registered), for a port RDMA CM picked that a TCP socket holds (iWARP):
     * the fresh id picks another. If no id can be created, the channel keeps the old one.
     */
    final void replaceId() throws VerbsException {
        CmId fresh = handler.resources().provider().createId(handler.cmChannel(), unsafe());
        destroyId();
        id = fresh;
    }

    /** Takes the CM id away from the channel (it destroys it elsewhere: {@code RdmaSocketUnsafe.destroy}); may be null. */
    final CmId detachId() {
        CmId detached = id;
        id = null;
        return detached;
    }

    private void destroyId() {
        if (id != null) {
            try {
                id.close();
            } catch (VerbsException e) {
                logger.debug("rdma_destroy_id failed", e);
            }
            id = null;
        }
    }
}
