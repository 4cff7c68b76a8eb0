package dev.dex.multijvm;

import java.util.Arrays;

/**
 * The values one key was given, in order: the bulk-loaded value, then every write the client sent. With at
 * most one write of the key in flight, writes are totally ordered, so what a read may return is known: the
 * last acknowledged value when it began, or a value sent since.
 *
 * <p>Concurrency: methods synchronize on the history; the write path and completions run on different threads.
 */
final class KeyHistory {
    private long[] values = new long[4];
    private int size;
    /** Index of the last acknowledged value; 0 is the loaded value. */
    private int acknowledged;

    KeyHistory(long loaded) {
        values[0] = loaded;
        size = 1;
    }

    /** Records a write about to be sent; returns its index, to acknowledge it. */
    synchronized int send(long value) {
        if (size == values.length) {
            values = Arrays.copyOf(values, size * 2);
        }
        values[size] = value;
        return size++;
    }

    synchronized void acknowledge(int index) {
        acknowledged = Math.max(acknowledged, index);
    }

    /** Index of the last acknowledged value, to pass to {@link #readable} when a read begins. */
    synchronized int acknowledged() {
        return acknowledged;
    }

    synchronized long lastAcknowledged() {
        return values[acknowledged];
    }

    /** Whether a read that began when {@code from} was the last acknowledged index may return {@code value}. */
    synchronized boolean readable(int from, long value) {
        return indexOf(value, from, size) >= 0;
    }

    /** Whether {@code value} was loaded or acknowledged for this key at some point. */
    synchronized boolean onceAcknowledged(long value) {
        return indexOf(value, 0, acknowledged + 1) >= 0;
    }

    /** Whether {@code value} was loaded or sent for this key (acknowledged or not). */
    synchronized boolean everSent(long value) {
        return indexOf(value, 0, size) >= 0;
    }

    private int indexOf(long value, int from, int to) {
        for (int i = from; i < to; i++) {
            if (values[i] == value) {
                return i;
            }
        }
        return -1;
    }
}
