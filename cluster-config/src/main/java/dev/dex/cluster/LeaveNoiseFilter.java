package dev.dex.cluster;

import org.slf4j.Marker;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.turbo.TurboFilter;
import ch.qos.logback.core.spi.FilterReply;

/**
 * Drops the warnings Artery logs for a connection whose other end left the cluster, so that a graceful leave
 * (a node stopping, {@code dex client} exiting, the end of the demo) prints nothing alarming. Artery's TCP
 * streams report every closed peer connection at WARN ({@code [outbound connection to ...] Upstream failed,
 * cause: StreamTcpException: ...}), and an association's streams report that they stopped with their own
 * system ({@code Outbound message stream to ... failed after shutdown}). A peer that really fails is still
 * reported where it matters: the cluster marks it unreachable and downs it, and those lines are kept, as are
 * all other warnings of both loggers. Also dropped: sharding's notice that a region dropped the messages it
 * had buffered for a shard in handoff ({@code Dropping [1] buffered messages to shard [12] during hand off to
 * avoid re-ordering}); those are partition batches, which the compute node answers {@code NOT_HELD} at once
 * (its {@code DroppedBatches}) and their clients send again, so every scale-out printed a dozen alarming lines
 * about something handled.
 *
 * <p>Installed by {@code logback.xml}; stateless, so safe on every logging thread.
 */
public final class LeaveNoiseFilter extends TurboFilter {
    static final String STREAM_LOGGER = "org.apache.pekko.stream.Materializer";
    static final String ASSOCIATION_LOGGER = "org.apache.pekko.remote.artery.Association";
    static final String REGION_LOGGER = "org.apache.pekko.cluster.sharding.ShardRegion";

    @Override
    public FilterReply decide(Marker marker, Logger logger, Level level, String format, Object[] params, Throwable t) {
        if (logger == null || format == null || level != Level.WARN) {
            return FilterReply.NEUTRAL;
        }
        String name = logger.getName();
        if (name.equals(STREAM_LOGGER) && format.contains("Upstream failed")
                && (format.contains("StreamTcpException") || mentions(params, "StreamTcpException"))) {
            return FilterReply.DENY;
        }
        if (name.equals(ASSOCIATION_LOGGER) && format.contains("failed after shutdown")) {
            return FilterReply.DENY;
        }
        if (name.equals(REGION_LOGGER) && format.contains("during hand off to avoid re-ordering")) {
            return FilterReply.DENY;
        }
        return FilterReply.NEUTRAL;
    }

    private static boolean mentions(Object[] params, String text) {
        if (params == null) {
            return false;
        }
        for (Object param : params) {
            if (param != null && String.valueOf(param).contains(text)) {
                return true;
            }
        }
        return false;
    }
}
