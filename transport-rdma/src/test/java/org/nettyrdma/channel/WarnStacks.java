package org.nettyrdma.channel;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;

import java.util.ArrayList;
import java.util.List;

/**
 * The events logged at WARN or above with a stack trace, where Logback is the logging binding (the host's tests). The
 * VM runner has no logging jars (Netty logs to JDK logging there, which this does not watch): then it collects
 * nothing. Only the nested {@link Logback} touches Logback's classes, and it is loaded only where they exist.
 */
final class WarnStacks {
    /** Logback's appender, or null; typed Object so that this class does not need Logback to load. */
    private final Object appender;

    private WarnStacks(Object appender) {
        this.appender = appender;
    }

    /** Starts collecting, on the root logger. */
    static WarnStacks start() {
        try {
            Class.forName("ch.qos.logback.classic.LoggerContext", false, WarnStacks.class.getClassLoader());
            Class.forName("org.slf4j.LoggerFactory", false, WarnStacks.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            return new WarnStacks(null);
        }
        return new WarnStacks(Logback.start());
    }

    /** "logger: message (exception: its message)" of each WARN-or-worse event with a throwable since the last call. */
    List<String> take() {
        return appender == null ? List.of() : Logback.take(appender);
    }

    void stop() {
        if (appender != null) {
            Logback.stop(appender);
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
