package dev.dex.actors;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

import org.apache.pekko.actor.ActorIdentity;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Identify;
import org.apache.pekko.cluster.sharding.ShardCoordinator;
import org.apache.pekko.event.Logging;
import org.apache.pekko.event.LoggingAdapter;
import org.apache.pekko.pattern.Patterns;

import scala.collection.immutable.IndexedSeq;
import scala.concurrent.Future;
import scala.jdk.javaapi.CollectionConverters;
import scala.jdk.javaapi.FutureConverters;

import com.typesafe.config.Config;

/**
 * Pekko's least-shard allocation, except that a rebalance round starts only when every compute node's shard region
 * answers a probe: a rebalance never waits on a node that died and is not yet known to be dead.
 *
 * <p>Why. A rebalance (a {@code RebalanceWorker} of the coordinator) asks every region to acknowledge the start
 * of the handoff, then asks the shard's region to hand it off and waits for the shard to stop; meanwhile the
 * coordinator holds every request for that shard's home, so the partition serves nothing. A region that died
 * never acknowledges: the move waits until the cluster removes the node (the failure detector's verdict, the
 * downing, the removal: 6-10 s with {@code dex-cluster.conf}), even when the partition moves between two live
 * nodes. Worse, if the dead region is the one the shard moves away from, its removal counts as the missing
 * acknowledgement; the worker then sends the handoff to the dead region and waits for a termination it has
 * already consumed, until {@code handoff-timeout} (60 s here, so that a live handoff can write a large cache
 * back). Pekko's own strategy does not rebalance while a member is unreachable, but a crashed node counts as
 * reachable until the failure detector's verdict, and rounds run every 2 s while a join settles (each moves at
 * most {@code rebalance-absolute-limit} partitions, so a large cluster needs many). So when the delegate proposes
 * shards to move, this strategy first sends {@link Identify} to every region and proposes nothing this round
 * unless all of them answer within the probe timeout; by the next round a dead node is unreachable (and Pekko's
 * strategy waits) or removed. What remains is a region that dies between its answer and the worker's first
 * message, milliseconds apart, and client proxies, which take part in a handoff but are not regions and cannot
 * be probed here (docs/durability.md, "A crash during a handoff").
 *
 * <p>Allocation of a new shard is the delegate's, unchanged.
 *
 * <pre>
 * Concurrency: the coordinator calls it from its own actor, one call at a time; the probes' answers complete on
 * the ask pattern's threads and only build the returned set. The delegate is Pekko's, started here with the
 * system.
 * </pre>
 */
public final class ProbedRebalance implements ShardCoordinator.ActorSystemDependentAllocationStrategy {
    private final Duration probeTimeout;
    private ShardCoordinator.ShardAllocationStrategy delegate;
    private LoggingAdapter log;

    /** @param probeTimeout how long a source region may take to answer before its shards wait for the next round */
    public ProbedRebalance(Duration probeTimeout) {
        if (probeTimeout.isNegative() || probeTimeout.isZero()) {
            throw new IllegalArgumentException("the rebalance probe timeout must be positive: " + probeTimeout);
        }
        this.probeTimeout = probeTimeout;
    }

    @Override
    public void start(ActorSystem system) {
        Config least = system.settings().config().getConfig("pekko.cluster.sharding.least-shard-allocation-strategy");
        delegate = ShardCoordinator.leastShardAllocationStrategy(least.getInt("rebalance-absolute-limit"),
                least.getDouble("rebalance-relative-limit"));
        if (delegate instanceof ShardCoordinator.ActorSystemDependentAllocationStrategy dependent) {
            dependent.start(system);
        } else if (delegate instanceof ShardCoordinator.StartableAllocationStrategy startable) {
            startable.start();
        }
        log = Logging.getLogger(system, ProbedRebalance.class);
    }

    @Override
    public Future<ActorRef> allocateShard(ActorRef requester, String shardId,
                                          scala.collection.immutable.Map<ActorRef, IndexedSeq<String>> current) {
        return delegate.allocateShard(requester, shardId, current);
    }

    @Override
    public Future<scala.collection.immutable.Set<String>> rebalance(
            scala.collection.immutable.Map<ActorRef, IndexedSeq<String>> current,
            scala.collection.immutable.Set<String> inProgress) {
        Map<ActorRef, IndexedSeq<String>> allocations = CollectionConverters.asJava(current);
        CompletionStage<Set<String>> confirmed = FutureConverters.asJava(delegate.rebalance(current, inProgress))
                .thenCompose(proposed -> confirm(allocations, CollectionConverters.asJava(proposed)));
        return FutureConverters.asScala(confirmed.thenApply(set -> CollectionConverters.asScala(set).toSet()));
    }

    /** The proposed shards if every region answered the probe in time, else none. */
    private CompletionStage<Set<String>> confirm(Map<ActorRef, IndexedSeq<String>> allocations, Set<String> proposed) {
        if (proposed.isEmpty()) {
            return CompletableFuture.completedFuture(Set.of());
        }
        List<ActorRef> regions = new ArrayList<>(allocations.keySet());
        List<CompletableFuture<Boolean>> answers = new ArrayList<>();
        for (ActorRef region : regions) {
            answers.add(probe(region).handle((alive, failure) -> failure == null && alive).toCompletableFuture());
        }
        return CompletableFuture.allOf(answers.toArray(CompletableFuture[]::new)).thenApply(done -> {
            List<String> silent = new ArrayList<>();
            for (int i = 0; i < regions.size(); i++) {
                if (!answers.get(i).join()) {
                    silent.add(regions.get(i).path().address().toString());
                }
            }
            if (silent.isEmpty()) {
                return proposed;
            }
            log.info("rebalance of partitions {} postponed: the shard regions of {} did not answer within {} ms (crashed?)",
                    new java.util.TreeSet<>(proposed), silent, probeTimeout.toMillis());
            return Set.<String>of();
        });
    }

    /** Whether {@code region} answers an Identify within the probe timeout (a stopped actor answers empty). */
    private CompletionStage<Boolean> probe(ActorRef region) {
        return Patterns.ask(region, new Identify("dex-rebalance-probe"), probeTimeout)
                .thenApply(answer -> answer instanceof ActorIdentity identity && identity.getActorRef().isPresent());
    }
}
