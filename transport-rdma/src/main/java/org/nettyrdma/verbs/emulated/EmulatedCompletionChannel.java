package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.CompletionChannel;
import org.nettyrdma.verbs.CompletionQueue;

import java.util.ArrayDeque;

final class EmulatedCompletionChannel implements CompletionChannel {
    private final ArrayDeque<EmulatedCompletionQueue> events = new ArrayDeque<>();
    private volatile EmulatedEventWaiter waiter;

    void waiter(EmulatedEventWaiter waiter) {
        this.waiter = waiter;
    }

    void notify(EmulatedCompletionQueue cq) {
        synchronized (events) {
            events.add(cq);
        }
        EmulatedEventWaiter w = waiter;
        if (w != null) {
            w.signal();
        }
    }

    boolean hasEvents() {
        synchronized (events) {
            return !events.isEmpty();
        }
    }

    @Override
    public CompletionQueue getEvent() {
        synchronized (events) {
            return events.poll();
        }
    }

    @Override
    public void close() {
        EmulatedEventWaiter w = waiter;
        if (w != null) {
            w.remove(this);
        }
    }
}
