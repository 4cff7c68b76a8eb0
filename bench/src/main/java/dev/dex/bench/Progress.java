package dev.dex.bench;

import java.io.PrintWriter;

import me.tongfei.progressbar.ConsoleProgressBarConsumer;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;

/**
 * Progress bars for the phases of a run, on stderr. On a terminal the bar is redrawn in place. When stderr
 * is not a terminal, or {@code CI=true}, each bar prints a plain line now and then
 * ({@link PlainProgressConsumer}), so logs stay short.
 */
final class Progress {
    /** {@code interactive} or {@code plain}; {@code bin/dex} sets it from {@code [ -t 2 ]}. */
    static final String STYLE_PROPERTY = "dex.progress";

    private final boolean interactive;
    private final PrintWriter err;

    private Progress(boolean interactive, PrintWriter err) {
        this.interactive = interactive;
        this.err = err;
    }

    /**
     * Interactive when stderr is a terminal: as {@link #STYLE_PROPERTY} says, else when this JVM has a console;
     * always plain when the environment says {@code CI=true}.
     */
    static Progress detect(PrintWriter err) {
        boolean interactive;
        String style = System.getProperty(STYLE_PROPERTY, "");
        if ("true".equalsIgnoreCase(System.getenv("CI"))) {
            interactive = false;
        } else if (style.equals("interactive") || style.equals("plain")) {
            interactive = style.equals("interactive");
        } else {
            interactive = System.console() != null;
        }
        return new Progress(interactive, err);
    }

    static Progress plain(PrintWriter err) {
        return new Progress(false, err);
    }

    /** A started bar for {@code total} steps; close it when the phase ends. */
    ProgressBar start(String task, long total) {
        ProgressBarBuilder builder = new ProgressBarBuilder()
                .setTaskName(task)
                .setInitialMax(total)
                .setStyle(ProgressBarStyle.ASCII)
                .showSpeed();
        if (interactive) {
            err.flush();
            builder.setConsumer(new ConsoleProgressBarConsumer(System.err)).setUpdateIntervalMillis(200);
        } else {
            builder.setConsumer(new PlainProgressConsumer(err)).setUpdateIntervalMillis(1000);
        }
        return builder.build();
    }
}
