package dev.dex.actors.node;

import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.receptionist.Receptionist;

/**
 * Finds the memory nodes of a cluster from any member, for code outside the compute nodes that reaches the
 * fabric itself (the demo's and the tests' bulk loaders): their server ids and fabric endpoints.
 */
public final class MemoryNodes {
    private MemoryNodes() {
    }

    /**
     * Waits until at least {@code count} memory nodes are registered and have described themselves; returns
     * each one's fabric endpoint by server id, ready for {@link dev.dex.rdma.Fabric#connect(Map)}. Blocks the
     * caller (never call it from an actor).
     *
     * @throws TimeoutException when fewer than {@code count} answer within {@code timeout}
     */
    public static Map<Integer, String> endpoints(ActorSystem<?> system, int count, Duration timeout)
            throws InterruptedException, TimeoutException {
        long deadline = System.nanoTime() + timeout.toNanos();
        Duration ask = Duration.ofSeconds(5);
        while (true) {
            Map<Integer, String> found = new TreeMap<>();
            try {
                Receptionist.Listing listing = AskPattern.<Receptionist.Command, Receptionist.Listing>ask(system.receptionist(),
                        replyTo -> Receptionist.find(MemoryNode.KEY, replyTo), ask, system.scheduler())
                        .toCompletableFuture().get(ask.toMillis(), TimeUnit.MILLISECONDS);
                for (ActorRef<MemoryNode.Command> node : listing.getServiceInstances(MemoryNode.KEY)) {
                    MemoryNode.Description description = AskPattern.<MemoryNode.Command, MemoryNode.Description>ask(node,
                            MemoryNode.Describe::new, ask, system.scheduler()).toCompletableFuture().get(ask.toMillis(), TimeUnit.MILLISECONDS);
                    found.put(description.serverId(), description.endpoint());
                }
            } catch (ExecutionException | TimeoutException slow) {
                // A node that is still starting (or was just stopped): ask the Receptionist again.
            }
            if (found.size() >= count) {
                return found;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new TimeoutException(found.size() + " of " + count + " memory nodes described themselves within " + timeout);
            }
            Thread.sleep(50);
        }
    }
}
