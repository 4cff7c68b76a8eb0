package dev.dex.actors.node;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Scheduler;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

import dev.dex.core.offload.OffloadChannel;
import dev.dex.core.offload.OffloadRequest;
import dev.dex.rdma.GlobalAddress;

/**
 * The cluster's offload channel: each phase of an offloaded operation is a message to the
 * {@link MemoryNode} that holds the subtree; the reply comes back to a small actor of the compute node,
 * which wakes the waiting engine thread. A request unanswered within the timeout is refused (the engine
 * falls back to its caching path), so a lost memory node never hangs a worker; the memory node does not
 * start a request after half the timeout, so a late one never runs under the fallback.
 *
 * <p>Concurrency: engine threads call {@link #submit}; the reply actor completes requests. Requests in
 * flight live in a concurrent map keyed by a sequence number; whoever removes an entry (reply or
 * timeout) answers it, exactly once.
 */
final class ActorOffloadChannel implements OffloadChannel {
    private final Map<Integer, ActorRef<MemoryNode.Command>> servers;
    private final Map<Long, OffloadRequest> pending = new ConcurrentHashMap<>();
    private final AtomicLong ids = new AtomicLong();
    private final Scheduler scheduler;
    private final Duration timeout;
    /** Runs timeouts; thread-safe, unlike the owning actor's context. */
    private final scala.concurrent.ExecutionContextExecutor executor;
    private volatile ActorRef<MemoryNode.OffloadResult> replies;

    ActorOffloadChannel(Map<Integer, ActorRef<MemoryNode.Command>> servers, Scheduler scheduler, Duration timeout,
                        org.apache.pekko.actor.typed.javadsl.ActorContext<?> owner) {
        this.servers = new ConcurrentHashMap<>(servers);
        this.scheduler = scheduler;
        this.timeout = timeout;
        this.executor = owner.getSystem().executionContext();
    }

    /** The behaviour of the actor that receives replies; spawn it once and pass its ref to {@link #replyTo}. */
    Behavior<MemoryNode.OffloadResult> replyBehavior() {
        return Behaviors.receive(MemoryNode.OffloadResult.class)
                .onMessage(MemoryNode.OffloadResult.class, result -> {
                    OffloadRequest request = pending.remove(result.id());
                    if (request != null) {
                        // The memory node answered: it ran the request or will not (a refusal, a full queue).
                        request.mayRunUntil(0);
                        try {
                            request.answer(result.status(), result.found(), result.value(), result.path(), result.versions(),
                                    result.pathLength());
                        } catch (RuntimeException malformed) {
                            // A malformed answer (a bad path): the waiting engine thread falls back instead of waiting on.
                            request.refuse();
                        }
                    }
                    return Behaviors.same();
                })
                .build();
    }

    /** Memory server {@code serverId} is now {@code node} (a memory node that restarted): later offloads go there. */
    void serverAt(int serverId, ActorRef<MemoryNode.Command> node) {
        servers.put(serverId, node);
    }

    void replyTo(ActorRef<MemoryNode.OffloadResult> ref) {
        this.replies = ref;
    }

    @Override
    public void submit(OffloadRequest request) {
        ActorRef<MemoryNode.Command> server = servers.get(GlobalAddress.serverId(request.start()));
        ActorRef<MemoryNode.OffloadResult> replyTo = replies;
        if (server == null || replyTo == null) {
            request.refuse();
            return;
        }
        long id = ids.incrementAndGet();
        pending.put(id, request);
        // The memory node starts it only within half the timeout, so it never runs after this side gave up
        // (clocks of the hosts within half the timeout of each other; docs/durability.md).
        long deadline = System.currentTimeMillis() + timeout.toMillis() / 2;
        request.mayRunUntil(System.nanoTime() + timeout.toNanos());
        long[] key = request.key();
        server.tell(new MemoryNode.Offload(id, request.phase(), request.op(), request.partition(), request.epoch(), key[0],
                request.newValue(), request.start(), deadline, replyTo, java.util.Arrays.copyOfRange(key, 1, key.length)));
        scheduler.scheduleOnce(timeout, () -> {
            OffloadRequest late = pending.remove(id);
            if (late != null) {
                late.refuse();
            }
        }, executor);
    }

    @Override
    public void close() {
        pending.keySet().forEach(id -> {
            OffloadRequest request = pending.remove(id);
            if (request != null) {
                request.refuse();
            }
        });
    }
}
