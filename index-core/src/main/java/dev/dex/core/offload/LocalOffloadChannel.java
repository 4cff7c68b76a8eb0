package dev.dex.core.offload;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.atomic.AtomicLong;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.VerbChecks;

/**
 * The in-process offload channel: per memory server, a bounded queue and a bounded number of
 * memory-side threads ({@code dex.memory.offload-threads}, default 1) that run a {@link SubtreeExecutor}
 * over the server's exported region. An optional latency (spun by the sender) emulates the network
 * round trip of a two-sided message.
 *
 * <p>Concurrency: the queues are the only shared state between senders and memory-side threads; a request
 * is handed over by {@link BlockingQueue#offer} (full queue: rejected at once, never blocking the sender)
 * and answered by its volatile completion flag. Memory-side threads busy-poll while requests keep coming
 * and senders spin while they wait, because a park and wake-up costs more than an offload; both block
 * after a bounded spin. On a machine with fewer cores than compute plus memory-side threads, the spinning
 * threads compete for cores, and offloading pays a scheduling delay that real memory-side cores would not.
 */
public final class LocalOffloadChannel implements OffloadChannel {
    /** {@code dex.memory.offload-queue} of index-core's reference.conf, its one home. */
    public static final int DEFAULT_QUEUE_CAPACITY = com.typesafe.config.ConfigFactory.defaultReferenceUnresolved().getInt("dex.memory.offload-queue");

    private final BlockingQueue<OffloadRequest>[] queues;
    private final List<Thread> threads = new ArrayList<>();
    private final long latencyNs;
    private final AtomicLong executed = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    private volatile boolean closed;

    /**
     * @param regions        the memory servers' exported regions
     * @param threadsPerServer memory-side threads of each server (the paper's memory-side cores)
     * @param latencyNs      round-trip latency the sender spins before each request
     */
    @SuppressWarnings("unchecked")
    public LocalOffloadChannel(List<? extends ExportedRegion> regions, int threadsPerServer, int queueCapacity, long latencyNs) {
        if (threadsPerServer < 1) {
            throw new IllegalArgumentException("memory-side offload threads must be >= 1: " + threadsPerServer);
        }
        if (queueCapacity < 1) {
            throw new IllegalArgumentException("offload queue capacity must be >= 1: " + queueCapacity);
        }
        if (latencyNs < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns: " + latencyNs);
        }
        this.latencyNs = latencyNs;
        int maxId = 0;
        for (ExportedRegion region : regions) {
            maxId = Math.max(maxId, region.serverId());
        }
        queues = new BlockingQueue[maxId + 1];
        for (ExportedRegion region : regions) {
            BlockingQueue<OffloadRequest> queue = new ArrayBlockingQueue<>(queueCapacity);
            queues[region.serverId()] = queue;
            for (int t = 0; t < threadsPerServer; t++) {
                SubtreeExecutor executor = new SubtreeExecutor(region.serverId(), region.region());
                Thread thread = new Thread(() -> serve(queue, executor), "dex-offload-s" + region.serverId() + "-" + t);
                thread.setDaemon(true);
                threads.add(thread);
                thread.start();
            }
        }
    }

    @Override
    public void submit(OffloadRequest request) {
        int server = GlobalAddress.serverId(request.start);
        BlockingQueue<OffloadRequest> queue = server < queues.length ? queues[server] : null;
        if (queue == null || closed) {
            throw new IllegalArgumentException("no offload executor for memory server " + server);
        }
        VerbChecks.spin(latencyNs);
        if (!queue.offer(request)) {
            request.reject();
        }
    }

    /** Requests run by the memory-side threads so far (both phases count). */
    public long executed() {
        return executed.get();
    }

    /** Requests that threw on the memory side (answered STALE); zero unless something is broken. */
    public long failures() {
        return failures.get();
    }

    private void serve(BlockingQueue<OffloadRequest> queue, SubtreeExecutor executor) {
        while (!closed) {
            OffloadRequest request = poll(queue);
            if (request == null) {
                return;
            }
            try {
                executor.run(request);
            } catch (RuntimeException e) {
                // A memory-side thread must outlive a bad request; the sender falls back to its caching path.
                failures.incrementAndGet();
                request.status = OffloadRequest.STALE;
            }
            executed.incrementAndGet();
            request.complete();
        }
    }

    /**
     * The next request: busy-polls for up to {@link #POLL_NANOS} after the last one, as the paper's
     * memory-side threads do, then blocks so an idle memory server gives its cores back.
     *
     * @return null when interrupted (closing)
     */
    private OffloadRequest poll(BlockingQueue<OffloadRequest> queue) {
        long deadline = System.nanoTime() + POLL_NANOS;
        OffloadRequest request;
        while ((request = queue.poll()) == null && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        if (request != null) {
            return request;
        }
        try {
            return queue.take();
        } catch (InterruptedException e) {
            return null;
        }
    }

    /** How long a memory-side thread busy-polls its queue before it blocks. */
    static final long POLL_NANOS = 20_000;

    @Override
    public void close() {
        closed = true;
        threads.forEach(Thread::interrupt);
        for (BlockingQueue<OffloadRequest> queue : queues) {
            if (queue != null) {
                OffloadRequest pending;
                while ((pending = queue.poll()) != null) {
                    pending.reject();
                }
            }
        }
    }
}
