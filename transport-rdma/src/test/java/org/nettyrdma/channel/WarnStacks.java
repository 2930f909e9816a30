package org.nettyrdma.channel;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.netty.util.internal.logging.InternalLoggerFactory;
import io.netty.util.internal.logging.JdkLoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.LogRecord;

/**
 * The events logged at WARN or above with a stack trace, where Logback is the logging binding (the host's tests), and
 * with {@link #startAnyBinding()} also where Netty logs to JDK logging (the VM runner, which has no logging jars);
 * {@link #start()} collects nothing there. Only the nested {@link Logback} touches Logback's classes, and it is loaded
 * only where they exist.
 */
final class WarnStacks {
    /** Logback's appender, or null; typed Object so that this class does not need Logback to load. */
    private final Object appender;
    /** The handler on JDK logging's root logger, or null. */
    private final JdkLogging jdk;

    private WarnStacks(Object appender, JdkLogging jdk) {
        this.appender = appender;
        this.jdk = jdk;
    }

    /** Starts collecting, on Logback's root logger (nothing where Logback is not the binding). */
    static WarnStacks start() {
        return new WarnStacks(startLogback(), null);
    }

    /** As {@link #start()}, and where Netty logs to JDK logging, collects there (on its root logger). */
    static WarnStacks startAnyBinding() {
        Object appender = startLogback();
        boolean jdkLogging = InternalLoggerFactory.getDefaultFactory() instanceof JdkLoggerFactory;
        return new WarnStacks(appender, jdkLogging ? JdkLogging.start() : null);
    }

    private static Object startLogback() {
        try {
            Class.forName("ch.qos.logback.classic.LoggerContext", false, WarnStacks.class.getClassLoader());
            Class.forName("org.slf4j.LoggerFactory", false, WarnStacks.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            return null;
        }
        return Logback.start();
    }

    /** "logger: message (exception: its message)" of each WARN-or-worse event with a throwable since the last call. */
    List<String> take() {
        List<String> stacks = new ArrayList<>(appender == null ? List.of() : Logback.take(appender));
        if (jdk != null) {
            stacks.addAll(jdk.take());
        }
        return stacks;
    }

    void stop() {
        if (appender != null) {
            Logback.stop(appender);
        }
        if (jdk != null) {
            java.util.logging.Logger.getLogger("").removeHandler(jdk);
        }
    }

    /** Collects WARNING-or-worse records with a throwable from JDK logging's root logger. */
    private static final class JdkLogging extends Handler {
        private final List<String> stacks = new ArrayList<>();

        static JdkLogging start() {
            JdkLogging h = new JdkLogging();
            h.setLevel(java.util.logging.Level.WARNING);
            java.util.logging.Logger.getLogger("").addHandler(h);
            return h;
        }

        @Override
        public synchronized void publish(LogRecord r) {
            if (r.getLevel().intValue() >= java.util.logging.Level.WARNING.intValue() && r.getThrown() != null) {
                stacks.add(r.getLoggerName() + ": " + r.getMessage() + " (" + r.getThrown().getClass().getName()
                        + ": " + r.getThrown().getMessage() + ')');
            }
        }

        synchronized List<String> take() {
            List<String> taken = new ArrayList<>(stacks);
            stacks.clear();
            return taken;
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    }

    private static final class Logback {
        static Object start() {
            if (!(org.slf4j.LoggerFactory.getILoggerFactory() instanceof LoggerContext)) {
                return null; // another binding
            }
            LoggerContext context = (LoggerContext) org.slf4j.LoggerFactory.getILoggerFactory();
            ListAppender<ILoggingEvent> appender = new ListAppender<>();
            appender.setContext(context);
            appender.start();
            context.getLogger(Logger.ROOT_LOGGER_NAME).addAppender(appender);
            return appender;
        }

        @SuppressWarnings("unchecked")
        static List<String> take(Object appender) {
            ListAppender<ILoggingEvent> a = (ListAppender<ILoggingEvent>) appender;
            List<ILoggingEvent> events = a.list;
            List<String> stacks = new ArrayList<>();
            synchronized (a) { // AppenderBase.doAppend holds it while it adds
                for (ILoggingEvent e : events) {
                    if (e.getLevel().isGreaterOrEqual(Level.WARN) && e.getThrowableProxy() != null) {
                        stacks.add(e.getLoggerName() + ": " + e.getFormattedMessage() + " ("
                                + e.getThrowableProxy().getClassName() + ": " + e.getThrowableProxy().getMessage()
                                + ')');
                    }
                }
                events.clear();
            }
            return stacks;
        }

        @SuppressWarnings("unchecked")
        static void stop(Object appender) {
            ListAppender<ILoggingEvent> a = (ListAppender<ILoggingEvent>) appender;
            ((LoggerContext) a.getContext()).getLogger(Logger.ROOT_LOGGER_NAME).detachAppender(a);
            a.stop();
        }
    }
}
