package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Test;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;

class LeaveNoiseFilterTest {

    @Test
    void onlyTheWarningsOfAPeerThatLeftAreDropped() {
        LoggerContext context = new LoggerContext();
        LeaveNoiseFilter filter = new LeaveNoiseFilter();
        filter.start();
        context.addTurboFilter(filter);
        ListAppender<ILoggingEvent> appender = new ListAppender<>();
        appender.setContext(context);
        appender.start();
        Logger root = context.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
        root.addAppender(appender);
        Logger stream = context.getLogger(LeaveNoiseFilter.STREAM_LOGGER);
        Logger association = context.getLogger(LeaveNoiseFilter.ASSOCIATION_LOGGER);

        // What Artery logs when a peer leaves: dropped.
        stream.warn("[outbound connection to [pekko://dex@127.0.0.1:4], message stream] Upstream failed, cause: "
                + "StreamTcpException: The connection has been aborted");
        stream.warn("[{}] Upstream failed, cause: {}", "outbound connection", "StreamTcpException: Connection refused");
        association.warn("Outbound message stream to [pekko://dex@127.0.0.1:4] failed after shutdown. AbortSignal");
        // Batches sharding drops for a partition in handoff: answered NOT_HELD by the compute node, so dropped too.
        Logger region = context.getLogger(LeaveNoiseFilter.REGION_LOGGER);
        region.warn("{}: Dropping [{}] buffered messages to shard [{}] during hand off to avoid re-ordering", "dex-partition", 1, "12");
        region.warn("{}: Buffer is full, dropping message for shard [{}]", "dex-partition", "3");
        // Everything else of those loggers, and the same text at another level or logger: kept.
        stream.warn("[inbound] Upstream failed, cause: FramingException: frame too large");
        stream.error("[outbound connection] Upstream failed, cause: StreamTcpException: The connection has been aborted");
        association.warn("Association to [pekko://dex@127.0.0.1:4] with UID [7] is irrecoverably failed. UID is now quarantined");
        context.getLogger("dev.dex.actors.partition.Partition").warn("Upstream failed, cause: StreamTcpException: failed after shutdown");

        List<String> kept = appender.list.stream().map(ILoggingEvent::getFormattedMessage).toList();
        assertEquals(5, kept.size(), kept.toString());
        assertEquals(List.of("dex-partition: Buffer is full, dropping message for shard [3]",
                "[inbound] Upstream failed, cause: FramingException: frame too large",
                "[outbound connection] Upstream failed, cause: StreamTcpException: The connection has been aborted",
                "Association to [pekko://dex@127.0.0.1:4] with UID [7] is irrecoverably failed. UID is now quarantined",
                "Upstream failed, cause: StreamTcpException: failed after shutdown"), kept);
        context.stop();
    }
}
