package dev.dex.actors.node;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Supplier;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Extension;
import org.apache.pekko.actor.typed.ExtensionId;
import org.apache.pekko.actor.typed.javadsl.Adapter;

/**
 * Whether this node can do its work, as its compute node last found ({@code docs/durability.md}, "When a verb fails"):
 * a compute node whose writes to the memory nodes have kept failing for longer than
 * {@code dex.compute.write-back-timeout} says why here, and Pekko Management's {@code /ready} answers 503 for as
 * long as it does ({@link Readiness}, registered in {@code dex-cluster.conf}).
 *
 * <p>Concurrency: one per actor system; the problem is a volatile reference, written by the compute node actor and
 * read by readiness checks on any thread.
 */
public final class NodeHealth implements Extension {
    public static final ExtensionId<NodeHealth> ID = new ExtensionId<>() {
        @Override
        public NodeHealth createExtension(ActorSystem<?> system) {
            return new NodeHealth();
        }
    };

    private volatile String problem;

    public static NodeHealth get(ActorSystem<?> system) {
        return system.registerExtension(ID);
    }

    /** Why the node cannot serve, or null when it can. */
    public String problem() {
        return problem;
    }

    /** Records why the node cannot serve; null clears it. */
    void problem(String why) {
        problem = why;
    }

    /**
     * A Pekko Management readiness check ({@code pekko.management.health-checks.readiness-checks}): ready unless the
     * node's {@link NodeHealth} names a problem.
     */
    public static final class Readiness implements Supplier<CompletionStage<Boolean>> {
        private final NodeHealth health;

        public Readiness(org.apache.pekko.actor.ActorSystem system) {
            this.health = NodeHealth.get(Adapter.toTyped(system));
        }

        @Override
        public CompletionStage<Boolean> get() {
            return CompletableFuture.completedFuture(health.problem() == null);
        }
    }
}
