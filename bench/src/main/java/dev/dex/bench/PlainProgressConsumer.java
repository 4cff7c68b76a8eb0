package dev.dex.bench;

import java.io.PrintWriter;
import java.util.concurrent.TimeUnit;

import me.tongfei.progressbar.ProgressBarConsumer;

/**
 * Prints a progress bar as whole lines for logs: the first rendering, then at most one line per
 * {@link #INTERVAL_NANOS}, then the final state when the bar closes.
 *
 * <p>Concurrency: the bar's refresh thread and the closing thread both call in; methods are synchronized.
 */
final class PlainProgressConsumer implements ProgressBarConsumer {
    static final long INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(5);
    private static final int WIDTH = 100;

    private final PrintWriter out;
    private boolean printedAny;
    private long lastPrinted;
    private String pending;

    PlainProgressConsumer(PrintWriter out) {
        this.out = out;
    }

    @Override
    public int getMaxRenderedLength() {
        return WIDTH;
    }

    @Override
    public synchronized void accept(String rendered) {
        long now = System.nanoTime();
        if (!printedAny || now - lastPrinted >= INTERVAL_NANOS) {
            out.println(rendered.stripTrailing());
            out.flush();
            printedAny = true;
            lastPrinted = now;
            pending = null;
        } else {
            pending = rendered;
        }
    }

    @Override
    public synchronized void close() {
        if (pending != null) {
            out.println(pending.stripTrailing());
            pending = null;
        }
        out.flush();
    }
}
