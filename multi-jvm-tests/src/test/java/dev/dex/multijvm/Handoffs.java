package dev.dex.multijvm;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The handoffs a compute node logged: {@code Partition} logs "partition N handed off in X ms: P pages
 * (B bytes) written back, F frames dropped" at INFO when it has released a partition.
 */
final class Handoffs {
    private static final Pattern LINE = Pattern.compile(
            "partition (\\d+) handed off in (\\d+) ms: (\\d+) pages \\((\\d+) bytes\\) written back, (\\d+) frames dropped");

    /** One logged handoff. */
    record Handoff(String node, int partition, long millis, long pagesWritten, long framesDropped) {
        @Override
        public String toString() {
            return String.format("%s: partition %d handed off in %d ms (%d pages written back, %d frames dropped)", node, partition,
                    millis, pagesWritten, framesDropped);
        }
    }

    private Handoffs() {
    }

    /** Every handoff in {@code log}, in the order logged. */
    static List<Handoff> parse(String node, String log) {
        List<Handoff> handoffs = new ArrayList<>();
        Matcher line = LINE.matcher(log);
        while (line.find()) {
            handoffs.add(new Handoff(node, Integer.parseInt(line.group(1)), Long.parseLong(line.group(2)),
                    Long.parseLong(line.group(3)), Long.parseLong(line.group(5))));
        }
        return handoffs;
    }

    /** The handoffs {@code node} logged so far. */
    static List<Handoff> of(NodeProcess node) {
        return parse(node.name(), node.logText());
    }

    /** The handoffs {@code node} logged after its first {@code earlier} ones (those of an earlier rebalance, say). */
    static List<Handoff> since(NodeProcess node, int earlier) {
        List<Handoff> all = of(node);
        return all.subList(Math.min(earlier, all.size()), all.size());
    }
}
