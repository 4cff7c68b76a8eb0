package dev.dex.actors.node;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.actors.partition.EngineWorkers;
import dev.dex.core.cache.DexEngine;

/**
 * The compute node's merge sweep ({@code dex.compute.merge-sweep}, docs/merges.md "Sweeps"): on every health tick, a
 * worker runs {@link DexEngine#sweep}, which merges over the whole of each partition whose deletes stopped this long
 * ago after enough of them. The merges that deletes start as they go leave leaves that could still merge; the sweep
 * settles what a burst of deletes left once it is over.
 *
 * <p>No sweep starts while the engine's writes fail, a memory server is out of the cluster, or the node leaves because
 * its writes fail (the passes would fail too, or hold partitions that are about to move).
 *
 * <p>Concurrency: {@link #tick} runs on the ComputeNode actor; the sweep itself on a worker thread, which logs through
 * this class's own logger, not the actor's. At most one sweep is submitted at a time ({@code running}, cleared when it
 * ends or could not be submitted).
 */
final class MergeSweep {
    private static final Logger LOG = LoggerFactory.getLogger(MergeSweep.class);
    /** {@code dex.compute.merge-sweep}'s default, for settings made without a configuration. */
    static final Duration DEFAULT = Duration.ofSeconds(2);

    private final long quietNanos;
    private final AtomicBoolean running = new AtomicBoolean();

    MergeSweep(Duration quiet) {
        this.quietNanos = quiet == null ? 0 : quiet.toNanos();
    }

    /**
     * Submits a sweep to a worker unless sweeps are off, one is running, the engine's writes fail, or the node is not
     * {@code healthy} (a memory server out of the cluster, or the node leaving because its writes fail).
     */
    void tick(DexEngine engine, EngineWorkers workers, boolean healthy) {
        if (quietNanos <= 0 || !healthy || engine.writesFailingSinceNanos() != 0 || !running.compareAndSet(false, true)) {
            return;
        }
        try {
            workers.submit(() -> engine.sweep(quietNanos)).whenComplete((swept, failure) -> {
                running.set(false);
                if (failure != null) {
                    LOG.warn("a merge sweep failed: {}", failure.toString());
                } else if (swept > 0) {
                    LOG.debug("a merge sweep went over {} quiet partitions", swept);
                }
            });
        } catch (RuntimeException rejected) {
            running.set(false); // the workers are closing
            LOG.debug("no merge sweep: {}", rejected.toString());
        }
    }
}
