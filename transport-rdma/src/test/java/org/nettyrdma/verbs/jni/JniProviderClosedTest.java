package org.nettyrdma.verbs.jni;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.VerbsException;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * What works without an RDMA device: the provider's lifecycle, misuse after close (an exception, never a crash), a
 * clear failure where a device is needed, and the event waiter (epoll + eventfd). Run under -Xcheck:jni.
 */
class JniProviderClosedTest {

    @BeforeAll
    static void libraryLoads() {
        assumeTrue(Native.loadFailure() == null, () -> "no native library: " + Native.loadFailure());
    }

    private static void assertErrno(int errno, Executable call) {
        VerbsException e = assertThrows(VerbsException.class, call);
        assertEquals(Errno.describe(errno), Errno.describe(e.errno()), e.getMessage());
    }

    @Test
    void closedProviderRefusesEveryCall() throws Exception {
        JniProvider provider = JniProvider.create();
        assertEquals("jni", provider.name());
        provider.close();
        provider.close();
        assertErrno(Errno.EBADF, provider::devices);
        assertErrno(Errno.EBADF, provider::createEventChannel);
        assertErrno(Errno.EBADF, provider::createWaiter);
        assertErrno(Errno.EINVAL, () -> provider.createId(null, "x"));
        assertTrue(provider.faults() == null, "no fault injection on hardware");
    }

    @Test
    void withoutKernelRdmaDevicesFailWithTheCause() {
        assumeTrue(!Files.exists(Paths.get("/sys/class/infiniband")), "this machine has RDMA");
        JniProvider provider = JniProvider.create();
        try {
            VerbsException e = assertThrows(VerbsException.class, provider::devices);
            assertEquals("rdma_get_devices", e.verb());
            assertTrue(e.getMessage().contains("kernel without RDMA support"), e.getMessage());
            e = assertThrows(VerbsException.class, provider::createEventChannel);
            assertEquals("rdma_create_event_channel", e.verb());
        } finally {
            provider.close();
        }
    }

    @Test
    void waiterWakesAndTimesOut() throws Exception {
        JniProvider provider = JniProvider.create();
        EventWaiter waiter = provider.createWaiter();
        try {
            assertFalse(waiter.await(0));
            long start = System.nanoTime();
            assertFalse(waiter.await(TimeUnit.MILLISECONDS.toNanos(30)));
            assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(30), "returned early");
            waiter.wakeup();
            waiter.wakeup();
            assertTrue(waiter.await(TimeUnit.SECONDS.toNanos(5)));
            assertFalse(waiter.await(TimeUnit.MILLISECONDS.toNanos(20)), "two wakeups woke two awaits");
        } finally {
            waiter.close();
            provider.close();
        }
    }

    @Test
    void wakeupFromAnotherThreadEndsAnEndlessAwait() throws Exception {
        JniProvider provider = JniProvider.create();
        EventWaiter waiter = provider.createWaiter();
        AtomicReference<Object> result = new AtomicReference<>();
        CountDownLatch started = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            started.countDown();
            try {
                result.set(waiter.await(Long.MAX_VALUE));
            } catch (Throwable e) {
                result.set(e);
            }
        });
        t.start();
        assertTrue(started.await(5, TimeUnit.SECONDS));
        Thread.sleep(50);
        waiter.wakeup();
        t.join(5000);
        assertFalse(t.isAlive());
        assertEquals(Boolean.TRUE, result.get());
        waiter.close();
        provider.close();
    }

    @Test
    void closedWaiterRefusesAwaitAndIgnoresWakeup() throws Exception {
        JniProvider provider = JniProvider.create();
        EventWaiter waiter = provider.createWaiter();
        waiter.close();
        waiter.close();
        waiter.wakeup();
        assertErrno(Errno.EBADF, () -> waiter.await(0));
        provider.close();
    }

    @Test
    void wakeupsRacingCloseNeverWriteAClosedFd() throws Exception {
        JniProvider provider = JniProvider.create();
        for (int round = 0; round < 50; round++) {
            EventWaiter waiter = provider.createWaiter();
            Thread t = new Thread(() -> {
                for (int i = 0; i < 1000; i++) {
                    waiter.wakeup();
                }
            });
            t.start();
            waiter.await(0);
            waiter.close();
            t.join();
        }
        provider.close();
    }
}
